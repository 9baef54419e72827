package badgerkv

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
)

func TestLockedDirectory(t *testing.T) {
	t.Parallel()
	kv, dir := openTestKV(t)
	_ = kv
	_, err := Open(Options{Dir: dir})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open error = %v, want ErrLocked", err)
	}
	if want := "storage directory " + dir + " is locked by another fhirgate/caddy process"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not contain %q", err, want)
	}
}

func TestOpenRequiresDir(t *testing.T) {
	t.Parallel()
	if _, err := Open(Options{}); err == nil {
		t.Fatal("opening without a directory succeeded")
	}
}

func TestInMemory(t *testing.T) {
	t.Parallel()
	kv, err := Open(Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	s := store.New(kv, store.Options{})
	u := seedUser(t, s, "mem@example.com")
	if got, err := s.UserByEmail(context.Background(), "mem@example.com"); err != nil || got.ID != u.ID {
		t.Fatalf("UserByEmail = %v, %v", got, err)
	}
	kv.RunGC() // must be a no-op, not an error log or panic
}

func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	kv, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s := store.New(kv, store.Options{})
	p := seedProject(t, s, "p")
	u := seedUser(t, s, "keep@example.com")
	m := seedMembership(t, s, p, u, "ext")
	if err := kv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := kv.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	kv, err = Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	defer kv.Close()
	s = store.New(kv, store.Options{})
	got, err := s.MembershipByExternalID(ctx, p.ID, "ext")
	if err != nil || toJSON(t, got) != toJSON(t, m) {
		t.Fatalf("after reopen: %v, %v", got, err)
	}
	if _, err := s.UserByEmail(ctx, "keep@example.com"); err != nil {
		t.Fatal(err)
	}
}

func TestBackupRestore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, _ := openTestKV(t)
	s := store.New(src, store.Options{})
	p := seedProject(t, s, "p")
	u := seedUser(t, s, "backup@example.com")
	seedMembership(t, s, p, u, "ext")
	b := seedBot(t, s, p, "bot", store.Identifier{System: "https://s", Value: "v"})
	bin := mustCreate(t, s, &store.Binary{ContentType: "text/plain", Data: strings.Repeat("QUFB", 1000)}) // > value threshold
	login := &store.Login{User: store.Reference{Reference: "User/" + u.ID}}
	if err := s.Create(ctx, login, store.PutOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	deleted := seedUser(t, s, "deleted@example.com")
	mustDelete(t, s, "User", deleted.ID)

	var buf bytes.Buffer
	if err := src.Backup(&buf); err != nil {
		t.Fatalf("Backup: %v", err)
	}
	backup := buf.Bytes()

	dump := func(s *store.Store) string {
		var sb strings.Builder
		for _, typ := range store.ResourceTypes() {
			rs, err := s.List(ctx, typ, store.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			sb.WriteString(toJSON(t, rs))
		}
		return sb.String()
	}

	dst, _ := openTestKV(t)
	if err := dst.Restore(bytes.NewReader(backup)); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	r := store.New(dst, store.Options{})
	if got, want := dump(r), dump(s); got != want {
		t.Fatalf("restored data differs:\n%s\nwant\n%s", got, want)
	}
	if _, err := r.BotByIdentifier(ctx, p.ID, "https://s", "v"); err != nil {
		t.Fatalf("bot index not restored: %v", err)
	}
	if _, err := r.UserByEmail(ctx, "deleted@example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted user came back: %v", err)
	}
	if got, err := store.Get[store.Binary](ctx, r, bin.ID); err != nil || got.Data != bin.Data {
		t.Fatalf("binary not restored: %v", err)
	}
	for k, exp := range keysWithPrefixes(t, dst, "r/Login/", "i/Login.") {
		if exp == 0 {
			t.Fatalf("restored %s lost its TTL", k)
		}
	}

	t.Run("restore over existing data overwrites and merges", func(t *testing.T) {
		b.Name = "renamed after backup"
		if _, err := r.Put(ctx, b, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		extra := seedUser(t, r, "extra@example.com")
		if err := dst.Restore(bytes.NewReader(backup)); err != nil {
			t.Fatal(err)
		}
		got, err := store.Get[store.Bot](ctx, r, b.ID)
		if err != nil || got.Name != "bot" {
			t.Fatalf("bot after restore = %v, %v; want the backup's name", got, err)
		}
		if _, err := store.Get[store.User](ctx, r, extra.ID); err != nil {
			t.Fatalf("key absent from the backup was dropped: %v", err)
		}
	})

	t.Run("corrupt stream", func(t *testing.T) {
		if err := dst.Restore(bytes.NewReader(backup[:len(backup)/2])); err == nil {
			t.Fatal("restoring a truncated backup succeeded")
		}
	})
}

func TestRunGC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kv, _ := openTestKV(t)
	s := store.New(kv, store.Options{})
	// Rewrite large values so the value log has garbage to collect.
	bin := mustCreate(t, s, &store.Binary{ContentType: "text/plain", Data: strings.Repeat("QUFB", 4096)})
	for range 20 {
		if _, err := s.Put(ctx, bin, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kv.RunGC()
	if got, err := store.Get[store.Binary](ctx, s, bin.ID); err != nil || got.Data != bin.Data {
		t.Fatalf("binary after GC: %v", err)
	}
}

// TestValueLogGCRunsUntilClose checks the periodic value-log GC: it runs on
// its interval, never after Close, and leaves the data readable.
func TestValueLogGCRunsUntilClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	kv, err := Open(Options{Dir: dir, GCInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := store.New(kv, store.Options{})
	bin := mustCreate(t, s, &store.Binary{ContentType: "text/plain", Data: strings.Repeat("QUFB", 4096)})
	for range 5 {
		if _, err := s.Put(ctx, bin, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); kv.gcPasses.Load() < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d value-log GC passes in 10 s at a 10 ms interval", kv.gcPasses.Load())
		}
	}
	if err := kv.Close(); err != nil {
		t.Fatal(err)
	}
	passes := kv.gcPasses.Load()
	time.Sleep(50 * time.Millisecond)
	if n := kv.gcPasses.Load(); n != passes {
		t.Fatalf("%d value-log GC passes after Close", n-passes)
	}

	kv, err = Open(Options{Dir: dir, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	if kv.gcEvery != 0 {
		t.Errorf("a negative GCInterval left the GC loop on (every %v)", kv.gcEvery)
	}
	if got, err := store.Get[store.Binary](ctx, store.New(kv, store.Options{}), bin.ID); err != nil || got.Data != bin.Data {
		t.Fatalf("binary after GC and reopen: %v", err)
	}
}
