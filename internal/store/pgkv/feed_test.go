package pgkv

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
)

// feedWait bounds how long the tests wait for a notification. It is not
// the staleness bound under test (1 s, measured by BenchmarkChangeVisibility
// and the end-to-end test): the tests only need to see it arrive on a
// loaded machine.
const feedWait = 30 * time.Second

// replica is one Store on its own KV, as one gateway process has.
type replica struct {
	kv *KV
	st *store.Store
}

func openReplica(t testing.TB, dsn string) replica {
	t.Helper()
	kv, err := Open(context.Background(), Options{DSN: dsn, MaxConns: 4})
	if err != nil {
		t.Fatalf("opening a replica: %v", err)
	}
	t.Cleanup(func() { _ = kv.Close() })
	r := replica{kv: kv, st: store.New(kv, store.Options{})}
	r.waitListening(t, 1)
	return r
}

// waitListening waits until the replica's feed has reached LISTEN n times.
func (r replica) waitListening(t testing.TB, n int64) {
	t.Helper()
	eventually(t, fmt.Sprintf("the change feed listening (%d times)", n), func() bool { return r.kv.listens.Load() >= n })
}

// eventually polls cond until it holds, failing after feedWait.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(feedWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, feedWait)
		}
		time.Sleep(time.Millisecond)
	}
}

var allTypes = []string{"Project", "ClientApplication", "User", "ProjectMembership", "Bot", "Binary", "Login", "AuditEvent", "JsonWebKey", "AsyncJob"}

// TestFeedCarriesOtherReplicasWrites: a write committed on A moves B's
// counters for its type and its record; A counts its own write once, not
// again when its notification comes back; a Login's creation is not
// announced, its replacement is.
func TestFeedCarriesOtherReplicasWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgkvtest.DSN(t)
	a, b := openReplica(t, dsn), openReplica(t, dsn)

	p := &store.Project{Name: "p"}
	projectsA, projectsB := a.st.Changes("Project"), b.st.Changes("Project")
	if err := a.st.Create(ctx, p, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "B seeing A's Project", func() bool { return b.st.Changes("Project") != projectsB })

	// Notifications arrive in commit order: once A has heard B's write,
	// its own earlier notification has been delivered (and ignored).
	botsA := a.st.Changes("Bot")
	bot := &store.Bot{Name: "b"}
	bot.Meta.Project = p.ID
	if err := b.st.Create(ctx, bot, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "A seeing B's Bot", func() bool { return a.st.Changes("Bot") != botsA })
	if got := a.st.Changes("Project"); got != projectsA+1 {
		t.Errorf("A counted its own Project write %d times, want once", got-projectsA)
	}

	u := &store.User{Email: "u@example.com"}
	if err := a.st.Create(ctx, u, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	m := &store.ProjectMembership{Project: store.Reference{Reference: "Project/" + p.ID}, User: store.Reference{Reference: "User/" + u.ID}, Profile: &store.Reference{Reference: "Practitioner/x"}}
	if err := a.st.Create(ctx, m, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	login := &store.Login{User: store.Reference{Reference: "User/" + u.ID}, Membership: store.Reference{Reference: "ProjectMembership/" + m.ID}}
	loginsB := b.st.Changes("Login")
	if err := a.st.Create(ctx, login, store.PutOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	loginB := b.st.RecordChanges("Login", login.ID)
	projectsB = b.st.Changes("Project")
	p.Name = "renamed"
	if _, err := a.st.Put(ctx, p, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "B seeing the Project renamed", func() bool { return b.st.Changes("Project") != projectsB })
	if b.st.Changes("Login") != loginsB {
		t.Error("a Login's creation on A moved B's Login counter")
	}

	login.Revoked = true
	if _, err := a.st.Put(ctx, login, store.PutOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "B seeing the Login revoked", func() bool { return b.st.RecordChanges("Login", login.ID) != loginB })
	membershipB := b.st.RecordChanges("ProjectMembership", m.ID)
	if err := a.st.Delete(ctx, "ProjectMembership", m.ID); err == nil {
		eventually(t, "B seeing the membership deleted", func() bool {
			return b.st.RecordChanges("ProjectMembership", m.ID) != membershipB
		})
	} else {
		t.Fatal(err)
	}
}

// TestFeedReconnectMovesEveryCounter: when the listening connection is cut,
// the KV reconnects by itself and then moves every counter, since what was
// announced in between is lost; a write made meanwhile on another replica
// is therefore seen.
func TestFeedReconnectMovesEveryCounter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgkvtest.DSN(t)
	addr := pgkvtest.FreeAddr(t)
	proxied, target := pgkvtest.ViaProxy(t, dsn, addr)
	px := pgkvtest.StartProxy(t, addr, target)
	a, b := openReplica(t, dsn), openReplica(t, proxied)

	before := make(map[string]uint64)
	for _, typ := range allTypes {
		before[typ] = b.st.Changes(typ)
	}
	px.Cut()
	// While B cannot hear, A writes.
	if err := a.st.Create(ctx, &store.Project{Name: "unheard"}, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	pgkvtest.StartProxy(t, addr, target)
	b.waitListening(t, 2)
	for _, typ := range allTypes {
		if b.st.Changes(typ) == before[typ] {
			t.Errorf("Changes(%s) did not move after the feed reconnected", typ)
		}
	}
}

// TestFeedCoalescesLargeTransactions: a transaction announcing more than a
// notification can carry still reaches the other replica, coalesced to
// its types, so every record of them counts as changed.
func TestFeedCoalescesLargeTransactions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgkvtest.DSN(t)
	a, b := openReplica(t, dsn), openReplica(t, dsn)

	const n = 300
	ws := make([]store.Write, n)
	ids := make([]string, n)
	for i := range ws {
		ids[i] = fmt.Sprintf("%s-%04d", strings.Repeat("p", 50), i)
		p := &store.Project{Name: "p"}
		p.ID = ids[i]
		ws[i] = store.Write{Resource: p}
	}
	projects, record := b.st.Changes("Project"), b.st.RecordChanges("Project", ids[n/2])
	if err := a.st.PutAll(ctx, ws); err != nil {
		t.Fatal(err)
	}
	eventually(t, "B seeing the projects", func() bool { return b.st.Changes("Project") != projects })
	if b.st.RecordChanges("Project", ids[n/2]) == record {
		t.Error("a coalesced notification did not count as a change of each record of its type")
	}
}

// TestBuildPayload: topics are listed after the sender; too many for one
// notification become their types, and too many types become everything.
func TestBuildPayload(t *testing.T) {
	set := func(topics ...string) map[string]struct{} {
		m := make(map[string]struct{})
		for _, x := range topics {
			m[x] = struct{}{}
		}
		return m
	}
	if got := buildPayload("s", set("Bot/1", "Login/2")); got != "s\nBot/1\nLogin/2" {
		t.Errorf("small payload = %q", got)
	}
	many := set()
	for i := range 1000 {
		many[fmt.Sprintf("Bot/%036d", i)] = struct{}{}
	}
	many["Project/x"] = struct{}{}
	got := buildPayload("s", many)
	if got != "s\nBot\nProject" {
		t.Errorf("coalesced payload = %q", got)
	}
	types := set()
	for i := range 1000 {
		types[fmt.Sprintf("Type%010d/1", i)] = struct{}{}
	}
	if got := buildPayload("s", types); got != "s\n"+everything {
		t.Errorf("payload of too many types = %.40q…", got)
	}
	k := &KV{sender: "me"}
	if _, ok := k.parse("me\nBot/1"); ok {
		t.Error("a KV heard its own notification")
	}
	topics, ok := k.parse("other\nBot/1\nLogin")
	sort.Strings(topics)
	if !ok || strings.Join(topics, ",") != "Bot/1,Login" {
		t.Errorf("parse = %q, %v", topics, ok)
	}
	if topics, ok := k.parse("other\n" + everything); !ok || topics != nil {
		t.Errorf("parse(everything) = %q, %v; want nil topics", topics, ok)
	}
}

// TestInvalidateEverywhereReachesOtherReplicas: after a restore on A
// (Store.InvalidateEverywhere), every counter of B moves.
func TestInvalidateEverywhereReachesOtherReplicas(t *testing.T) {
	t.Parallel()
	dsn := pgkvtest.DSN(t)
	a, b := openReplica(t, dsn), openReplica(t, dsn)
	before := make(map[string]uint64)
	for _, typ := range allTypes {
		before[typ] = b.st.Changes(typ)
	}
	if err := a.st.InvalidateEverywhere(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, typ := range allTypes {
		eventually(t, "B's Changes("+typ+") moving", func() bool { return b.st.Changes(typ) != before[typ] })
	}
}
