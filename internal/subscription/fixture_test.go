package subscription

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/botapi"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/gateway/gatewaytest"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/queue/kvqueue"
	"github.com/fhirgate/fhirgate/internal/queue/riverqueue"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/pgkv"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
	"github.com/fhirgate/fhirgate/internal/subscription/subscriptiontest"
)

// fixture is the engine behind the real gateway (served over loopback
// HTTP, real OAuth) in front of the searching FHIR stand-in, on a real
// store and queue: Badger's with the store's, or PostgreSQL with River. Bots are recorded by botRecorder.
type fixture struct {
	st      *store.Store
	svc     *Service
	fhir    *subscriptiontest.FHIR
	srv     string // the gateway's FHIR base URL
	token   string // a project admin's, full access
	project string
	bots    *botRecorder
	q       *recordingQueue
	// failSearch, when set, is the ordinal (from 1) of the count search
	// the backend fails, once; searches counts them.
	failSearch, searches atomic.Int32

	mu     sync.Mutex
	events map[string]int // Options.Observe's
	lags   int            // Options.ObserveLag's calls
}

// observed returns how many times Options.Observe was told event.
func (f *fixture) observed(event string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.events[event]
}

// lagsObserved returns how many lags Options.ObserveLag was told.
func (f *fixture) lagsObserved() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lags
}

// botRecorder stands in for botapi: it records the messages and, when
// set, acts as the bot (with the run's context). refuse, when set, may
// answer a message with the error of a bot that could not start (no run
// recorded; tries counts them too). It stores the delivery AuditEvents
// in st at once (botapi batches them in the background).
type botRecorder struct {
	st     *store.Store
	mu     sync.Mutex
	runs   []botapi.Message
	tries  int
	act    func(ctx context.Context, m botapi.Message)
	refuse func(try int, m botapi.Message) error
}

func (b *botRecorder) RecordAudit(ev *store.AuditEvent) {
	if b.st != nil {
		_ = b.st.Create(context.Background(), ev, store.PutOptions{})
	}
}

func (b *botRecorder) RunMessage(ctx context.Context, m botapi.Message) (*botrunner.Result, error) {
	b.mu.Lock()
	b.tries++
	try, refuse := b.tries, b.refuse
	b.mu.Unlock()
	if refuse != nil {
		if err := refuse(try, m); err != nil {
			return nil, err
		}
	}
	b.mu.Lock()
	b.runs = append(b.runs, m)
	act := b.act
	b.mu.Unlock()
	if act != nil {
		act(ctx, m)
	}
	return &botrunner.Result{Outcome: botrunner.OutcomeSuccess}, nil
}

// triesSoFar returns how many messages it was given, refused included.
func (b *botRecorder) triesSoFar() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tries
}

func (b *botRecorder) messages() []botapi.Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]botapi.Message(nil), b.runs...)
}

// standInBackend reaches the stand-in directly, as the request-less
// backend reaches the real one. With f set, it fails f's failSearch.
type standInBackend struct {
	base string
	f    *fixture
}

func (s standInBackend) Do(ctx context.Context, method, path string, query url.Values, body []byte, header http.Header) (*gateway.BackendResponse, error) {
	if s.f != nil && query.Get("_summary") == "count" {
		if n := s.f.searches.Add(1); n == s.f.failSearch.Load() {
			return nil, errors.New("the backend's search failed")
		}
	}
	u := s.base + "/fhir/R4/" + strings.TrimPrefix(path, "/")
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return &gateway.BackendResponse{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// loopbackClients lets webhooks reach loopback servers (tests only).
type loopbackClients struct{}

func (loopbackClients) For(string) (*http.Client, error) {
	return &http.Client{Timeout: 10 * time.Second}, nil
}

// newFixture is the fixture on Badger with the store's queue.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureOn(t, false)
}

// onBothStores runs test on a fixture on Badger with the store's queue,
// then on one on PostgreSQL with River's.
func onBothStores(t *testing.T, test func(t *testing.T, f *fixture)) {
	t.Run("badger", func(t *testing.T) { test(t, newFixtureOn(t, false)) })
	t.Run("postgres", func(t *testing.T) { test(t, newFixtureOn(t, true)) })
}

func newFixtureOn(t *testing.T, postgres bool) *fixture {
	t.Helper()
	f := &fixture{fhir: subscriptiontest.NewFHIR(t), events: map[string]int{}}
	qo := queue.Options{Backoff: func(int) time.Duration { return 20 * time.Millisecond }, PollInterval: 20 * time.Millisecond}
	var inner queue.Queue
	if postgres {
		kv, err := pgkv.Open(context.Background(), pgkv.Options{DSN: pgkvtest.DSN(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kv.Close() })
		f.st = store.New(kv, store.Options{})
		if inner, err = riverqueue.New(context.Background(), kv.Pool(), pgkv.PgxTx, qo, nil); err != nil {
			t.Fatal(err)
		}
	} else {
		f.st = storetest.Open(t)
		inner = kvqueue.New(f.st.KV(), qo, nil)
	}
	f.bots = &botRecorder{st: f.st}
	ctx := context.Background()
	idp := gatewaytest.IdentityProvider(t)
	p := &store.Project{Name: "clinic"}
	mustCreate(t, f.st, p)
	f.project = p.ID
	client := &store.ClientApplication{Name: "app", IdentityProvider: &store.IdentityProvider{UserInfoURL: idp.URL}}
	client.Meta.Project = p.ID
	mustCreate(t, f.st, client)
	user := &store.User{Email: "alice@example.com"}
	mustCreate(t, f.st, user)
	m := &store.ProjectMembership{Project: store.Reference{Reference: "Project/" + p.ID}, User: store.Reference{Reference: "User/" + user.ID},
		Profile: &store.Reference{Reference: "Practitioner/alice"}, Admin: true}
	m.Meta.Project = p.ID
	mustCreate(t, f.st, m)
	auth := gatewaytest.OAuth(t, f.st)
	f.token = gatewaytest.AccessToken(t, auth, client.ID, "alice")

	q := &recordingQueue{Queue: inner}
	f.q = q
	jobs, err := RegisterJobs(q)
	if err != nil {
		t.Fatal(err)
	}
	f.svc, err = New(Options{Store: f.st, Queue: q, Bots: f.bots, HTTPClients: loopbackClients{},
		Backends: func(context.Context, *oauth.Identity) (Backend, error) { return standInBackend{f.fhir.URL, f}, nil },
		Observe: func(event string) {
			f.mu.Lock()
			f.events[event]++
			f.mu.Unlock()
		},
		ObserveLag: func(time.Duration) {
			f.mu.Lock()
			f.lags++
			f.mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	jobs.Use(f.svc)
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = q.Stop(c)
	})
	gw, err := gateway.New(gateway.Options{FHIRBase: "/fhir/R4", OAuth: auth, Operations: f.svc.Handler, Writes: f.svc})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = gatewaytest.Serve(t, gw, f.fhir.URL).URL + "/fhir/R4"
	return f
}

func mustCreate(t *testing.T, st *store.Store, r store.Resource) {
	t.Helper()
	if err := st.Create(context.Background(), r, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// do sends a request through the gateway as the admin.
func (f *fixture) do(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv+"/"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+f.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/fhir+json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// subscribe stores a Subscription written by author (nil: full access).
func (f *fixture) subscribe(t *testing.T, criteria, endpoint string, author *store.SubscriptionAuthor, exts ...store.SubscriptionExtension) *store.Subscription {
	t.Helper()
	if author == nil {
		author = &store.SubscriptionAuthor{Profile: "Practitioner/alice"}
	}
	s := &store.Subscription{Status: "active", Criteria: criteria, Channel: store.SubscriptionChannel{Type: "rest-hook", Endpoint: endpoint}, Extension: exts, Author: author}
	s.Meta.Project = f.project
	mustCreate(t, f.st, s)
	return s
}

// eventually waits for cond, failing after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
