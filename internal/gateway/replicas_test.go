package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/gateway/gatewaytest"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/pgkv"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
	"github.com/fhirgate/fhirgate/internal/tokens"
	"github.com/fhirgate/fhirgate/internal/userinfo"
)

func TestMain(m *testing.M) { os.Exit(pgkvtest.Main(m)) }

// replicaWait bounds how long the tests wait for one replica to see
// another's write. It is not the 1 s staleness bound, which the change
// feed's benchmark and the end-to-end test measure: a loaded machine must
// not fail these.
const replicaWait = 30 * time.Second

// gwReplica is one gateway process in miniature: its own PostgreSQL pool,
// store, keyring, OAuth server and gate in front of the shared backend.
type gwReplica struct {
	st   *store.Store
	tok  *tokens.Service
	auth *oauth.Server
	url  string
}

func newGWReplica(t *testing.T, dsn, backend string) *gwReplica {
	t.Helper()
	kv, err := pgkv.Open(context.Background(), pgkv.Options{DSN: dsn, MaxConns: 4, Timeout: 3 * time.Second})
	if err != nil {
		t.Fatalf("opening a replica's store: %v", err)
	}
	t.Cleanup(func() { _ = kv.Close() })
	r := &gwReplica{st: store.New(kv, store.Options{})}
	keys := oauth.KeyStore{Store: r.st}
	if r.tok, err = tokens.New(context.Background(), tokens.Options{Issuer: "https://gw.test", Keys: keys, KeysChanged: keys.Changes}); err != nil {
		t.Fatal(err)
	}
	r.auth, err = oauth.New(oauth.Options{Store: r.st, Tokens: r.tok, UserInfo: userinfo.New(userinfo.Options{DefaultTimeout: 5 * time.Second})})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Options{FHIRBase: "/fhir/R4", OAuth: r.auth})
	if err != nil {
		t.Fatal(err)
	}
	r.url = gatewaytest.Serve(t, gw, backend).URL
	return r
}

// get reads a backend resource through the replica's gate.
func (r *gwReplica) get(t *testing.T, token string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, r.url+"/fhir/R4/Patient/p1", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// replicaSite is a project with a client and members, written on the
// first replica, and a backend that answers every read.
type replicaSite struct {
	client  string
	members map[string]*store.ProjectMembership
	backend string
}

func newReplicaSite(t *testing.T, st *store.Store, names ...string) *replicaSite {
	t.Helper()
	ctx := context.Background()
	idp := gatewaytest.IdentityProvider(t)
	create := func(r store.Resource) {
		t.Helper()
		if err := st.Create(ctx, r, store.PutOptions{}); err != nil {
			t.Fatalf("creating %T: %v", r, err)
		}
	}
	p := &store.Project{Name: "clinic"}
	create(p)
	client := &store.ClientApplication{Name: "app", IdentityProvider: &store.IdentityProvider{UserInfoURL: idp.URL}}
	client.Meta.Project = p.ID
	create(client)
	site := &replicaSite{client: client.ID, members: map[string]*store.ProjectMembership{}}
	for _, name := range names {
		u := &store.User{Email: name + "@example.com"}
		create(u)
		m := &store.ProjectMembership{Project: store.Reference{Reference: "Project/" + p.ID},
			User: store.Reference{Reference: "User/" + u.ID}, Profile: &store.Reference{Reference: "Practitioner/" + name}}
		create(m)
		site.members[name] = m
	}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/fhir+json")
		_, _ = w.Write([]byte(`{"resourceType":"Patient","id":"p1"}`))
	}))
	t.Cleanup(backend.Close)
	site.backend = backend.URL
	return site
}

// untilStatus polls the replica with token until it answers want, and
// returns how long that took after since.
func untilStatus(t *testing.T, r *gwReplica, token string, want int, since time.Time, what string) time.Duration {
	t.Helper()
	for {
		if r.get(t, token).StatusCode == want {
			return time.Since(since)
		}
		if time.Since(since) > replicaWait {
			t.Fatalf("%s: replica B still not answering %d after %v", what, want, replicaWait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestReplicasSeeEachOthersWrites: two gateways on one PostgreSQL. A token
// exchanged on A works on B; revoking it on A, deactivating a membership
// on A and rotating the keys on A all act on B, without a restart and
// without waiting for a cache to expire.
func TestReplicasSeeEachOthersWrites(t *testing.T) {
	dsn := pgkvtest.DSN(t)
	ctx := context.Background()
	probe := newGWReplica(t, dsn, "http://127.0.0.1:1")
	site := newReplicaSite(t, probe.st, "alice", "bob")
	a, b := newGWReplica(t, dsn, site.backend), newGWReplica(t, dsn, site.backend)

	alice := gatewaytest.AccessToken(t, a.auth, site.client, "alice")
	if s := b.get(t, alice).StatusCode; s != http.StatusOK {
		t.Fatalf("a token exchanged on A, read through B = %d", s)
	}

	// Revocation on A (the B entry is warm in its session cache).
	form := url.Values{"token": {alice}}
	req := httptest.NewRequest(http.MethodPost, "/oauth2/revoke", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	a.auth.ServeRevoke(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("revoke on A = %d %s", rec.Code, rec.Body)
	}
	t.Logf("revoked on A, 401 on B after %v", untilStatus(t, b, alice, http.StatusUnauthorized, time.Now(), "revocation"))

	// A membership deactivated on A.
	bob := gatewaytest.AccessToken(t, a.auth, site.client, "bob")
	if s := b.get(t, bob).StatusCode; s != http.StatusOK {
		t.Fatalf("bob through B = %d", s)
	}
	m, err := store.Get[store.ProjectMembership](ctx, a.st, site.members["bob"].ID)
	if err != nil {
		t.Fatal(err)
	}
	inactive := false
	m.Active = &inactive
	if _, err := a.st.Put(ctx, m, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("membership deactivated on A, 401 on B after %v", untilStatus(t, b, bob, http.StatusUnauthorized, time.Now(), "deactivation"))
	m.Active = nil
	if _, err := a.st.Put(ctx, m, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}

	// Keys rotated on A: A's next token, signed with a key B has never
	// loaded, verifies on B at once (the unknown kid reloads B's keyring).
	fresh, err := a.tok.Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rotated := gatewaytest.AccessToken(t, a.auth, site.client, "bob")
	if s := b.get(t, rotated).StatusCode; s != http.StatusOK {
		t.Fatalf("a token signed with A's new key, read through B = %d", s)
	}
	if b.tok.SigningKeyID() != fresh.ID {
		t.Fatalf("B signs with %s, want A's new key %s", b.tok.SigningKeyID(), fresh.ID)
	}
}

// TestReplicaRidesOutPostgreSQLOutage: while PostgreSQL cannot be reached
// from replica B, its writes (token exchanges) answer 503 with Retry-After
// and a token it already verified answers 200 from its caches or 503,
// never 401; once PostgreSQL is back B recovers by itself, and every
// exchange B acknowledged is stored.
func TestReplicaRidesOutPostgreSQLOutage(t *testing.T) {
	dsn := pgkvtest.DSN(t)
	ctx := context.Background()
	addr := pgkvtest.FreeAddr(t)
	proxied, target := pgkvtest.ViaProxy(t, dsn, addr)
	px := pgkvtest.StartProxy(t, addr, target)
	a := newGWReplica(t, dsn, "http://127.0.0.1:1")
	site := newReplicaSite(t, a.st, "alice")
	b := newGWReplica(t, proxied, site.backend)
	alice := gatewaytest.AccessToken(t, b.auth, site.client, "alice")
	if s := b.get(t, alice).StatusCode; s != http.StatusOK {
		t.Fatalf("before the outage = %d", s)
	}

	// Exchanges on B, throughout: the acknowledged ones must all be stored.
	var (
		mu      sync.Mutex
		acked   []string // access tokens B returned
		refused []*oauth.Error
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, _, e := b.auth.Exchange(ctx, oauth.ExchangeRequest{ClientID: site.client, SubjectToken: gatewaytest.SubjectToken("alice")})
			mu.Lock()
			if e == nil {
				acked = append(acked, resp.AccessToken)
			} else {
				refused = append(refused, e)
			}
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
	})

	for ackedBefore := 0; ackedBefore < 5; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		ackedBefore = len(acked)
		mu.Unlock()
	}
	px.Cut()
	var down []int
	deadline := time.Now().Add(replicaWait)
	for {
		resp := b.get(t, alice)
		down = append(down, resp.StatusCode)
		if resp.StatusCode == http.StatusServiceUnavailable {
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("503 without Retry-After")
			}
			break
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a verified token during the outage = %d, want 200 (cached) or 503", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the verified token still answered from caches after %v: the session cache is unbounded", replicaWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, _, e := b.auth.Exchange(ctx, oauth.ExchangeRequest{ClientID: site.client, SubjectToken: gatewaytest.SubjectToken("alice")})
	if e == nil || e.Status != http.StatusServiceUnavailable || e.RetryAfter <= 0 {
		t.Fatalf("an exchange during the outage = %+v, want 503 with Retry-After", e)
	}

	pgkvtest.StartProxy(t, addr, target)
	untilStatus(t, b, alice, http.StatusOK, time.Now(), "recovery")
	for {
		_, _, e := b.auth.Exchange(ctx, oauth.ExchangeRequest{ClientID: site.client, SubjectToken: gatewaytest.SubjectToken("alice")})
		if e == nil {
			break
		}
		if e.Status != http.StatusServiceUnavailable {
			t.Fatalf("an exchange while recovering = %+v", e)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	for _, e := range refused {
		if e.Status != http.StatusServiceUnavailable {
			t.Errorf("an exchange during the outage was refused with %d %s, want 503", e.Status, e.Code)
		}
	}
	if len(acked) == 0 {
		t.Fatal("no exchange was acknowledged")
	}
	for _, tok := range acked {
		c, err := a.tok.Verify(ctx, tok, tokens.KindAccess)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Get[store.Login](ctx, a.st, c.LoginID); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				t.Fatalf("an exchange B acknowledged is lost: Login/%s", c.LoginID)
			}
			t.Fatal(err)
		}
	}
	t.Logf("outage: %d exchanges acknowledged, %d refused with 503; answers to the verified token before 503: %v", len(acked), len(refused), down)
}
