package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func newUser(id, email string) *User {
	u := &User{Email: email}
	u.ID = id
	return u
}

// TestPutAllIsAllOrNothing: a batch whose last write breaks a rule writes
// none of the batch and leaves the stored records at their versions.
func TestPutAllIsAllOrNothing(t *testing.T) {
	st := newTestStore(t)
	ctx := context.Background()
	old := newUser("u1", "one@example.com")
	if _, err := st.Put(ctx, old, PutOptions{}); err != nil {
		t.Fatal(err)
	}
	version := old.Meta.VersionID

	tests := []struct {
		name  string
		batch func() []Write
		want  error
	}{
		{"unique value taken inside the batch", func() []Write {
			return []Write{
				{Resource: newUser("u1", "renamed@example.com"), IfMatch: version},
				{Resource: newUser("u2", "two@example.com")},
				{Resource: newUser("u3", "TWO@example.com")},
			}
		}, ErrConflict},
		{"stale IfMatch", func() []Write {
			return []Write{
				{Resource: newUser("u2", "two@example.com")},
				{Resource: newUser("u1", "renamed@example.com"), IfMatch: "not-the-version"},
			}
		}, ErrConflict},
		{"missing reference", func() []Write {
			m := &ProjectMembership{Project: Reference{Reference: "Project/nope"}, User: Reference{Reference: "User/u2"}}
			m.ID = "m1"
			return []Write{{Resource: newUser("u2", "two@example.com")}, {Resource: m}}
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			batch := tt.batch()
			err := st.PutAll(ctx, batch)
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			for _, w := range batch {
				if w.Resource.Base().Meta.VersionID != "" {
					t.Fatalf("a failed PutAll left a version on %s", w.Resource.Base().ID)
				}
			}
			got, err := Get[User](ctx, st, "u1")
			if err != nil || got.Email != "one@example.com" || got.Meta.VersionID != version {
				t.Fatalf("u1 after a failed batch: %+v, %v", got, err)
			}
			if _, err := Get[User](ctx, st, "u2"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("u2 of a failed batch was written: %v", err)
			}
			if _, err := st.UserByEmail(ctx, "two@example.com"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("the email index of a failed batch was written: %v", err)
			}
		})
	}
}

// TestPutAllWritesAsPutDoes: references to records created earlier in the
// batch resolve, a replaced record frees its old unique value, and every
// record gets a version.
func TestPutAllWritesAsPutDoes(t *testing.T) {
	st := newTestStore(t)
	ctx := context.Background()
	old := newUser("u1", "one@example.com")
	if _, err := st.Put(ctx, old, PutOptions{}); err != nil {
		t.Fatal(err)
	}
	p := &Project{Name: "P"}
	p.ID = "p"
	m := &ProjectMembership{Project: Reference{Reference: "Project/p"}, User: Reference{Reference: "User/u2"}}
	m.ID = "m"
	batch := []Write{
		{Resource: newUser("u1", "renamed@example.com"), IfMatch: old.Meta.VersionID},
		{Resource: newUser("u2", "one@example.com")}, // the email u1 gives up
		{Resource: p},
		{Resource: m},
	}
	if err := st.PutAll(ctx, batch); err != nil {
		t.Fatal(err)
	}
	for _, w := range batch {
		if w.Resource.Base().Meta.VersionID == "" {
			t.Fatalf("%s has no version", w.Resource.Base().ID)
		}
	}
	if u, err := st.UserByEmail(ctx, "one@example.com"); err != nil || u.ID != "u2" {
		t.Fatalf("one@example.com: %+v, %v", u, err)
	}
	ms, err := st.MembershipsByProjectUser(ctx, "p", "u2")
	if err != nil || len(ms) != 1 || ms[0].Meta.Project != "p" {
		t.Fatalf("membership: %+v, %v", ms, err)
	}
	// Invalid content is refused before any write, naming the record.
	bad := []Write{{Resource: newUser("u3", "three@example.com")}, {Resource: newUser("u4", "not an email")}}
	if err := st.PutAll(ctx, bad); err == nil || !strings.Contains(err.Error(), "User/u4") {
		t.Fatalf("err = %v, want a validation error naming User/u4", err)
	}
	if _, err := Get[User](ctx, st, "u3"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("u3 of an invalid batch was written: %v", err)
	}
}

// faultKV fails or panics on the n-th key a transaction sets: a write that
// dies half-way through applying a batch.
type faultKV struct {
	KV
	failAt int
	panics bool
}

var errInjected = errors.New("injected write failure")

func (f *faultKV) Update(ctx context.Context, fn func(Txn) error) error {
	return f.KV.Update(ctx, func(tx Txn) error {
		return fn(&faultTxn{Txn: tx, kv: f})
	})
}

type faultTxn struct {
	Txn
	kv   *faultKV
	sets int
}

func (t *faultTxn) Set(key, value []byte, ttl time.Duration) error {
	t.sets++
	if t.sets == t.kv.failAt {
		if t.kv.panics {
			panic(errInjected)
		}
		return errInjected
	}
	return t.Txn.Set(key, value, ttl)
}

// TestPutAllCrashMidwayLeavesNothing: whether the write fails or the
// process panics after some keys of the batch were set, the store holds
// the records as they were before, never part of the batch.
func TestPutAllCrashMidwayLeavesNothing(t *testing.T) {
	for _, panics := range []bool{false, true} {
		t.Run(fmt.Sprintf("panic=%v", panics), func(t *testing.T) {
			kv, _ := openTestKV(t)
			st := New(kv, Options{})
			ctx := context.Background()
			old := newUser("u1", "one@example.com")
			if _, err := st.Put(ctx, old, PutOptions{}); err != nil {
				t.Fatal(err)
			}
			faulty := New(&faultKV{KV: kv, failAt: 5, panics: panics}, Options{})
			batch := []Write{
				{Resource: newUser("u1", "renamed@example.com"), IfMatch: old.Meta.VersionID},
				{Resource: newUser("u2", "two@example.com")},
				{Resource: newUser("u3", "three@example.com")},
			}
			func() {
				defer func() {
					if r := recover(); r != nil && r != errInjected {
						panic(r)
					}
				}()
				if err := faulty.PutAll(ctx, batch); !errors.Is(err, errInjected) {
					t.Fatalf("err = %v, want the injected failure", err)
				}
			}()
			got, err := Get[User](ctx, st, "u1")
			if err != nil || got.Email != "one@example.com" || got.Meta.VersionID != old.Meta.VersionID {
				t.Fatalf("u1 after the crash: %+v, %v", got, err)
			}
			if u, err := st.UserByEmail(ctx, "one@example.com"); err != nil || u.ID != "u1" {
				t.Fatalf("old email index after the crash: %+v, %v", u, err)
			}
			for _, email := range []string{"renamed@example.com", "two@example.com", "three@example.com"} {
				if _, err := st.UserByEmail(ctx, email); !errors.Is(err, ErrNotFound) {
					t.Fatalf("%s of the crashed batch is visible: %v", email, err)
				}
			}
			// The same batch on the healthy store goes through whole.
			if err := st.PutAll(ctx, batch); err != nil {
				t.Fatal(err)
			}
			if u, err := st.UserByEmail(ctx, "three@example.com"); err != nil || u.ID != "u3" {
				t.Fatalf("three@example.com: %+v, %v", u, err)
			}
		})
	}
}

// TestPutAllTooBig: a batch beyond one Badger transaction is refused with
// ErrTxnTooBig and writes nothing; 400 bots with identifiers fit (about 490 do).
// Badger's limit: on Badger whatever KV the other tests use.
func TestPutAllTooBig(t *testing.T) {
	kv, _ := openTestKV(t)
	st := New(kv, Options{})
	ctx := context.Background()
	p := &Project{Name: "P"}
	p.ID = "p"
	bots := func(n int) []Write {
		ws := []Write{{Resource: p}}
		for i := range n {
			b := &Bot{Name: fmt.Sprintf("bot-%d", i), Identifier: []Identifier{{System: "https://example.com/bots", Value: fmt.Sprintf("bot-%d", i)}}}
			b.ID = fmt.Sprintf("bot-%d", i)
			b.Meta.Project = "p"
			b.SourceCode = &Attachment{ContentType: "text/javascript", URL: "Binary/" + b.ID + "-src", Title: "index.ts"}
			b.ExecutableCode = &Attachment{ContentType: "text/javascript", URL: "Binary/" + b.ID + "-exe", Title: "index.js"}
			ws = append(ws, Write{Resource: b})
		}
		return ws
	}
	err := st.PutAll(ctx, bots(20000))
	if !errors.Is(err, ErrTxnTooBig) {
		t.Fatalf("err = %v, want ErrTxnTooBig", err)
	}
	if _, err := Get[Project](ctx, st, "p"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the project of a refused batch was written: %v", err)
	}
	if err := st.PutAll(ctx, bots(400)); err != nil {
		t.Fatalf("400 bots: %v", err)
	}
}

// TestValidateWritesNothing: Validate refuses what Put refuses, leaves its
// argument as it was, and never writes.
func TestValidateWritesNothing(t *testing.T) {
	st := newTestStore(t)
	ctx := context.Background()
	good := newUser("u1", "one@example.com")
	if err := st.Validate(good); err != nil {
		t.Fatal(err)
	}
	if good.Meta.VersionID != "" || good.ResourceType != "" {
		t.Fatalf("Validate changed its argument: %+v", good)
	}
	if _, err := Get[User](ctx, st, "u1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Validate wrote: %v", err)
	}
	for _, bad := range []Resource{newUser("u1", "not an email"), newUser("bad id!", "one@example.com"), &Bot{}} {
		errV := st.Validate(bad)
		_, errP := st.Put(ctx, bad, PutOptions{})
		var ve *ValidationError
		if !errors.As(errV, &ve) || errP == nil || errV.Error() != errP.Error() {
			t.Fatalf("Validate: %v; Put: %v", errV, errP)
		}
	}
}

// TestTryAllWritesNothing: TryAll refuses what PutAll refuses (a unique
// value held by a stored record, a stale IfMatch, a batch too big for one
// transaction) and accepts what it accepts, writing nothing either way.
func TestTryAllWritesNothing(t *testing.T) {
	kv, _ := openTestKV(t)
	st := New(kv, Options{})
	ctx := context.Background()
	old := newUser("u1", "one@example.com")
	if _, err := st.Put(ctx, old, PutOptions{}); err != nil {
		t.Fatal(err)
	}
	keys := func() int {
		n := 0
		if err := kv.View(ctx, func(tx Txn) error {
			return tx.Scan(nil, false, func(_, _ []byte) error { n++; return nil })
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := keys()
	good := []Write{{Resource: newUser("u1", "renamed@example.com"), IfMatch: old.Meta.VersionID}, {Resource: newUser("u2", "one@example.com")}}
	if err := st.TryAll(ctx, good); err != nil {
		t.Fatal(err)
	}
	if good[0].Resource.Base().Meta.VersionID != "" {
		t.Fatal("TryAll left a version on its input")
	}
	if err := st.TryAll(ctx, []Write{{Resource: newUser("u2", "ONE@example.com")}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("a taken email: %v", err)
	}
	if err := st.TryAll(ctx, []Write{{Resource: newUser("u1", "x@example.com"), IfMatch: "stale"}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("a stale IfMatch: %v", err)
	}
	var many []Write
	for i := range 5000 {
		many = append(many, Write{Resource: newUser(fmt.Sprint("m", i), fmt.Sprintf("m%d@example.com", i))})
	}
	if err := st.TryAll(ctx, many); !errors.Is(err, ErrTxnTooBig) {
		t.Fatalf("5000 users: %v", err)
	}
	if n := keys(); n != before {
		t.Fatalf("TryAll changed the key count from %d to %d", before, n)
	}
	if got, err := Get[User](ctx, st, "u1"); err != nil || got.Meta.VersionID != old.Meta.VersionID {
		t.Fatalf("u1 after TryAll: %+v, %v", got, err)
	}
	// What TryAll accepted, PutAll writes.
	if err := st.PutAll(ctx, good); err != nil {
		t.Fatal(err)
	}
}
