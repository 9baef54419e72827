package subscription

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/botapi"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/queue/kvqueue"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
	"github.com/fhirgate/fhirgate/internal/subscription/spec"
)

// hook is a loopback webhook answering status and recording requests.
type hook struct {
	*httptest.Server
	mu     sync.Mutex
	status int
	got    []*http.Request
	bodies [][]byte
}

func newHook(t *testing.T, status int) *hook {
	h := &hook{status: status}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.got, h.bodies = append(h.got, r), append(h.bodies, b)
		st := h.status
		h.mu.Unlock()
		w.WriteHeader(st)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hook) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.got)
}

func TestSignedWebhookCarriesTheVersionWrittenAndMedplumsHeaders(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 200)
	s := f.subscribe(t, "Patient", h.URL+"/in", nil, store.SubscriptionExtension{URL: spec.ExtSecret, ValueString: "k3y"})
	s.Channel.Header = []string{"Authorization: Bearer a:b"}
	if _, err := f.st.Put(context.Background(), s, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	status, body := f.do(t, "POST", "Patient", `{"resourceType":"Patient","name":[{"family":"Doe"}]}`)
	if status != 201 {
		t.Fatalf("create: %d %s", status, body)
	}
	var created map[string]any
	_ = json.Unmarshal(body, &created)
	eventually(t, "the webhook", func() bool { return h.count() == 1 })
	h.mu.Lock()
	r, got := h.got[0], h.bodies[0]
	h.mu.Unlock()
	var delivered map[string]any
	_ = json.Unmarshal(got, &delivered)
	if delivered["id"] != created["id"] || r.Header.Get("Content-Type") != "application/fhir+json" {
		t.Fatalf("delivered %s (%v), created %s", got, r.Header, body)
	}
	if r.Header.Get("X-Signature") != spec.Sign("k3y", got) || r.Header.Get("X-Medplum-Subscription") != s.ID ||
		r.Header.Get("X-Medplum-Interaction") != "create" || r.Header.Get("Authorization") != "Bearer a:b" {
		t.Fatalf("headers %v", r.Header)
	}
}

func TestFailingWebhookIsRetriedToMaxAttemptsThenSwitchedOff(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 503)
	two := int64(2)
	s := f.subscribe(t, "Patient", h.URL, nil, store.SubscriptionExtension{URL: spec.ExtMaxAttempts, ValueInteger: &two})
	if status, body := f.do(t, "POST", "Patient", `{"resourceType":"Patient"}`); status != 201 {
		t.Fatalf("create: %d %s", status, body)
	}
	eventually(t, "the Subscription switched off", func() bool {
		got, err := store.Get[store.Subscription](context.Background(), f.st, s.ID)
		return err == nil && got.Status == "off"
	})
	got, _ := store.Get[store.Subscription](context.Background(), f.st, s.ID)
	if h.count() != 2 || !strings.Contains(got.Error, "503") {
		t.Fatalf("%d attempts, error %q", h.count(), got.Error)
	}
	// Off: the next write delivers nothing. The store shows "off" from
	// its commit, a moment before the switch-off's Put returns and the
	// engine's rule cache learns of it (the store counts the change).
	eventually(t, "the engine to know it is off", func() bool {
		sub, _, err := f.svc.rules.subscription(context.Background(), f.project, s.ID)
		return err == nil && sub == nil
	})
	f.do(t, "POST", "Patient", `{"resourceType":"Patient"}`)
	time.Sleep(300 * time.Millisecond)
	if h.count() != 2 {
		t.Fatalf("%d attempts after the Subscription was switched off", h.count())
	}
}

func TestCriteriaParametersAreDecidedByTheBackend(t *testing.T) {
	f := newFixture(t)
	sub := f.subscribe(t, "Patient?family=Match", "Bot/b1", nil)
	f.do(t, "POST", "Patient", `{"resourceType":"Patient","name":[{"family":"Other"}]}`)
	status, body := f.do(t, "POST", "Patient", `{"resourceType":"Patient","name":[{"family":"Match"}]}`)
	if status != 201 {
		t.Fatalf("create: %d %s", status, body)
	}
	var created map[string]any
	_ = json.Unmarshal(body, &created)
	eventually(t, "the bot", func() bool { return len(f.bots.messages()) == 1 })
	eventually(t, "both searches", func() bool { return len(f.fhir.Searches()) == 2 })
	time.Sleep(200 * time.Millisecond)
	runs := f.bots.messages()
	if len(runs) != 1 || !strings.Contains(string(runs[0].Body), `"Match"`) || runs[0].Bot != "Bot/b1" {
		t.Fatalf("runs %+v", runs)
	}
	// The run's AuditEvent names the Subscription and the resource.
	if e := runs[0].Entity; len(e) != 2 || e[0].Reference != "Subscription/"+sub.ID || e[1].Reference != "Patient/"+created["id"].(string) {
		t.Fatalf("entities %+v", e)
	}
	for _, q := range f.fhir.Searches() {
		if q.Get("family") != "Match" || q.Get("_summary") != "count" || q.Get("_id") == "" {
			t.Fatalf("search %v", q)
		}
	}
}

func TestAuthorWhoCannotReadTheResourceGetsNoWebhook(t *testing.T) {
	f := newFixture(t)
	denied, allowed := newHook(t, 200), newHook(t, 200)
	f.subscribe(t, "Patient", denied.URL, &store.SubscriptionAuthor{Profile: "Practitioner/carol", Scope: "user/Observation.rs"})
	f.subscribe(t, "Patient", allowed.URL, nil)
	f.do(t, "POST", "Patient", `{"resourceType":"Patient"}`)
	eventually(t, "the allowed webhook", func() bool { return allowed.count() == 1 })
	time.Sleep(200 * time.Millisecond)
	if denied.count() != 0 {
		t.Fatalf("a webhook whose author may not read Patient got %d deliveries", denied.count())
	}
}

func TestSubscriptionResourceIsServedByTheGatewayAndChecked(t *testing.T) {
	f := newFixture(t)
	status, body := f.do(t, "POST", "Subscription", `{"resourceType":"Subscription","status":"active","criteria":"Patient","channel":{"type":"rest-hook","endpoint":"Bot/nope"}}`)
	if status != 400 || !strings.Contains(string(body), "channel.endpoint") {
		t.Fatalf("a bot of no project: %d %s", status, body)
	}
	status, body = f.do(t, "POST", "Subscription", `{"resourceType":"Subscription","status":"active","criteria":"Patient","channel":{"type":"rest-hook","endpoint":"https://hook.example/x"}}`)
	if status != 201 || strings.Contains(string(body), "fhirgateAuthor") {
		t.Fatalf("create: %d %s", status, body)
	}
	var created store.Subscription
	_ = json.Unmarshal(body, &created)
	if status, body = f.do(t, "GET", "Subscription/"+created.ID+"/_history", ""); status != 200 || !strings.Contains(string(body), `"history"`) {
		t.Fatalf("history: %d %s", status, body)
	}
	if status, body = f.do(t, "GET", "Subscription?status=active", ""); status != 200 || !strings.Contains(string(body), `"fullUrl":"`+f.srv+"/Subscription/"+created.ID+`"`) {
		t.Fatalf("search: %d %s", status, body)
	}
	if status, _ = f.do(t, "DELETE", "Subscription/"+created.ID, ""); status != 200 {
		t.Fatalf("delete: %d", status)
	}
	if len(f.fhir.Searches()) != 0 {
		t.Fatal("Subscription requests reached the backend")
	}
}

func TestTwoBotsWritingEachOthersCriteriaStopAtTheBound(t *testing.T) {
	f := newFixture(t)
	f.subscribe(t, "Patient", "Bot/a", nil)
	f.subscribe(t, "Observation", "Bot/b", nil)
	id := &oauth.Identity{ProjectID: f.project, Profile: "Practitioner/alice"}
	n := 0
	// Each bot writes what the other subscribes to, with its run's
	// context, through the gate's write hook as a bot's medplum call does.
	f.bots.act = func(ctx context.Context, m botapi.Message) {
		typ := "Observation"
		if m.Bot == "Bot/b" {
			typ = "Patient"
		}
		f.bots.mu.Lock()
		n++
		rid := typ + "-" + string(rune('0'+n))
		f.bots.mu.Unlock()
		w := f.svc.Watch(ctx, &gateway.Write{Method: "POST", Segments: []string{typ}, Identity: id, Header: http.Header{}})
		if w == nil {
			t.Error("the bot's write is not watched")
			return
		}
		w.Done(ctx, &gateway.BackendResponse{Status: 201, Header: http.Header{"Location": {typ + "/" + rid + "/_history/1"}},
			Body: []byte(`{"resourceType":"` + typ + `","id":"` + rid + `","meta":{"versionId":"1"}}`)}, false)
	}
	f.do(t, "POST", "Patient", `{"resourceType":"Patient"}`)
	eventually(t, "the chain to stop with an AuditEvent", func() bool {
		evs, _ := store.Search[store.AuditEvent](context.Background(), f.st, store.Filter{Project: f.project})
		for _, ev := range evs {
			if ev.Outcome == "8" && strings.Contains(ev.OutcomeDesc, "chain") {
				return true
			}
		}
		return false
	})
	time.Sleep(200 * time.Millisecond)
	if runs := len(f.bots.messages()); runs != DefaultMaxDepth {
		t.Fatalf("%d runs, want %d", runs, DefaultMaxDepth)
	}
}

func TestDeleteParametersAreDecidedOnTheLastVersionBeforeTheDelete(t *testing.T) {
	f := newFixture(t)
	f.subscribe(t, "Patient?family=Gone", "Bot/b1", nil, store.SubscriptionExtension{URL: spec.ExtSupportedInteraction, ValueCode: "delete"})
	ids := map[string]string{}
	for _, family := range []string{"Gone", "Stay"} {
		status, body := f.do(t, "POST", "Patient", `{"resourceType":"Patient","name":[{"family":"`+family+`"}]}`)
		var created map[string]any
		if status != 201 || json.Unmarshal(body, &created) != nil {
			t.Fatalf("create: %d %s", status, body)
		}
		ids[family] = created["id"].(string)
	}
	for _, family := range []string{"Stay", "Gone"} {
		if status, body := f.do(t, "DELETE", "Patient/"+ids[family], ""); status != 200 {
			t.Fatalf("delete: %d %s", status, body)
		}
	}
	eventually(t, "the bot", func() bool { return len(f.bots.messages()) == 1 })
	time.Sleep(200 * time.Millisecond)
	runs := f.bots.messages()
	var in struct {
		DeletedResource struct {
			ID string `json:"id"`
		} `json:"deletedResource"`
	}
	if len(runs) != 1 || json.Unmarshal(runs[0].Body, &in) != nil || in.DeletedResource.ID != ids["Gone"] ||
		runs[0].Header.Get("X-Medplum-Deleted-Resource") != "Patient/"+ids["Gone"] {
		t.Fatalf("runs %+v", runs)
	}
}

func TestTriggerEnqueuedBeforeARestartRunsWithoutItsRequest(t *testing.T) {
	st := storetest.Open(t)
	p := &store.Project{Name: "clinic"}
	mustCreate(t, st, p)
	sub := &store.Subscription{Status: "active", Criteria: "Patient", Channel: store.SubscriptionChannel{Type: "rest-hook", Endpoint: "Bot/b1"},
		Author: &store.SubscriptionAuthor{Profile: "Practitioner/alice"}}
	sub.Meta.Project = p.ID
	mustCreate(t, st, sub)
	q := kvqueue.New(st.KV(), queue.Options{PollInterval: 20 * time.Millisecond}, nil)
	jobs, err := RegisterJobs(q)
	if err != nil {
		t.Fatal(err)
	}
	// What the previous process left: a trigger carrying its resource.
	raw, _ := json.Marshal(triggerArgs{Route: "of-a-dead-process", Project: p.ID, Writer: writer{Project: p.ID, Profile: "Practitioner/alice"}, At: time.Now(),
		Changes: []spec.Change{{Interaction: spec.Create, Type: "Patient", ID: "p1", Version: "1", Resource: json.RawMessage(`{"resourceType":"Patient","id":"p1"}`)}}})
	if _, err := q.Enqueue(context.Background(), queue.Job{Kind: TriggerKind, Args: raw}); err != nil {
		t.Fatal(err)
	}
	bots := &botRecorder{}
	var asked atomic.Int32
	// The backend is down: a job that carries what it needs runs anyway.
	down := func(context.Context, *oauth.Identity) (Backend, error) {
		asked.Add(1)
		return nil, errors.New("the backend is down")
	}
	svc, err := New(Options{Store: st, Queue: q, Bots: bots, Backends: down})
	if err != nil {
		t.Fatal(err)
	}
	jobs.Use(svc)
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Stop(context.Background()) })
	eventually(t, "the bot", func() bool { return len(bots.messages()) == 1 })
	if m := bots.messages()[0]; string(m.Body) != `{"resourceType":"Patient","id":"p1"}` || m.Bot != "Bot/b1" {
		t.Fatalf("run %+v", m)
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("the backend was asked %d times", n)
	}
}
