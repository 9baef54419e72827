package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/subscription/subscriptiontest"
)

// Webhook deliveries on the built Caddy: the author's read access decides
// what a webhook carries, and a failing endpoint is retried up to the
// Subscription's max attempts and then switched off.

// hookRequest is one POST a webhookReceiver got.
type hookRequest struct {
	path, subscription string
	body               map[string]any
}

// webhookReceiver is a loopback webhook endpoint that answers status and
// records every request.
type webhookReceiver struct {
	*httptest.Server
	status int
	mu     sync.Mutex
	got    []hookRequest
}

func newWebhookReceiver(t *testing.T, status int) *webhookReceiver {
	h := &webhookReceiver{status: status}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		req := hookRequest{path: r.URL.Path, subscription: r.Header.Get("X-Medplum-Subscription")}
		_ = json.Unmarshal(b, &req.body)
		h.mu.Lock()
		h.got = append(h.got, req)
		h.mu.Unlock()
		w.WriteHeader(h.status)
	}))
	t.Cleanup(h.Close)
	return h
}

// requests returns what the receiver got so far.
func (h *webhookReceiver) requests() []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookRequest(nil), h.got...)
}

// waitFor polls until the receiver got n requests, and returns them.
func (h *webhookReceiver) waitFor(t *testing.T, what string, n int) []hookRequest {
	t.Helper()
	within(t, what, time.Now(), 30*time.Second, func() bool { return len(h.requests()) >= n })
	return h.requests()
}

// startWebhookStack starts the subscriptions stack in front of the
// searching stand-in, and a webhook receiver answering each of statuses,
// every one on project alpha's egress allow-list.
func startWebhookStack(t *testing.T, statuses ...int) (*stack, []*webhookReceiver) {
	t.Helper()
	be := subscriptiontest.NewFHIR(t)
	s := startStackWith(t, subscriptionsCaddyfile(be.URL), "")
	var hooks []*webhookReceiver
	var hosts []string
	for _, status := range statuses {
		h := newWebhookReceiver(t, status)
		hooks, hosts = append(hooks, h), append(hosts, strings.TrimPrefix(h.URL, "http://"))
	}
	s.setEgress(t, map[string]any{"allowHttp": hosts})
	return s, hooks
}

// maxAttempts is Medplum's max-attempts extension of a Subscription.
func maxAttempts(n int) string {
	return `{"url":"https://medplum.com/fhir/StructureDefinition/subscription-max-attempts","valueInteger":` + strconv.Itoa(n) + `}`
}

// create writes a resource through the gateway and returns its id.
func (s *stack) create(t *testing.T, token, resourceType, body string) string {
	t.Helper()
	r := do(t, "POST", s.gateway+"/fhir/R4/"+resourceType, "application/fhir+json", body, bearer(token)...)
	if r.status != 201 {
		t.Fatalf("creating a %s: %d %s", resourceType, r.status, r.body)
	}
	return r.json(t)["id"].(string)
}

// TestWebhookCarriesNothingItsAuthorCannotRead: alice writes two
// Subscriptions on Patient, one with a token scoped to Observations only
// and one with full access. A Patient created through the gate reaches
// the full-access author's webhook and not the other. The narrow author's
// Subscription on Observation to the same receiver, delivered after the
// Patient's deliveries were enqueued, shows its webhooks work and that
// the Patient was decided by then.
func TestWebhookCarriesNothingItsAuthorCannotRead(t *testing.T) {
	s, hooks := startWebhookStack(t, 200, 200)
	denied, allowed := hooks[0], hooks[1]
	full := s.token(t, "alpha-app", "alice-token")
	narrow := scopedToken(t, s.gateway, "alpha-app", "alice-token", "openid user/Observation.rs user/Subscription.cruds")
	if r := do(t, "GET", s.gateway+"/fhir/R4/Patient?name=x", "", "", bearer(narrow)...); r.status != 403 {
		t.Fatalf("the narrow token searched Patients: %d %s", r.status, r.body)
	}
	subscribe(t, s.gateway, narrow, "Patient", denied.URL+"/patient")
	onObservation := subscribe(t, s.gateway, narrow, "Observation", denied.URL+"/observation")
	onPatient := subscribe(t, s.gateway, full, "Patient", allowed.URL+"/patient")

	pid := s.create(t, full, "Patient", `{"resourceType":"Patient","name":[{"family":"Hidden"}]}`)
	got := allowed.waitFor(t, "the full-access author's webhook", 1)
	if got[0].subscription != onPatient || got[0].body["id"] != pid {
		t.Fatalf("the full-access author's webhook got %+v, want Patient/%s from Subscription/%s", got[0], pid, onPatient)
	}
	// The Patient's trigger enqueued all its deliveries together, and the
	// queue takes due jobs earliest first: a Patient delivery to the narrow
	// author's webhook would leave the queue before the trigger of the
	// Observation written now.
	oid := s.create(t, full, "Observation", `{"resourceType":"Observation","status":"final"}`)
	denied.waitFor(t, "the narrow author's Observation webhook", 1)
	if got := denied.requests(); len(got) != 1 || got[0].path != "/observation" || got[0].subscription != onObservation || got[0].body["id"] != oid {
		t.Fatalf("the narrow author's receiver got %+v, want only Observation/%s", got, oid)
	}
	if got := allowed.requests(); len(got) != 1 {
		t.Fatalf("the full-access author's Patient webhook got %d requests, want 1", len(got))
	}
}

// TestWebhookAnswering500IsRetriedToMaxAttemptsThenSwitchedOff: a
// Subscription with max attempts 3 to an endpoint answering 500 is
// POSTed exactly three times, each attempt recorded in an AuditEvent, then
// read back through the gate as off with the reason in its error; the
// next Patient is not delivered to it, while another Subscription on
// Patient, to an endpoint answering 200, gets every Patient.
func TestWebhookAnswering500IsRetriedToMaxAttemptsThenSwitchedOff(t *testing.T) {
	s, hooks := startWebhookStack(t, 500, 200)
	failing, healthy := hooks[0], hooks[1]
	tok := s.token(t, "alpha-app", "alice-token")
	failingSub := subscribe(t, s.gateway, tok, "Patient", failing.URL+"/hook", maxAttempts(3))
	subscribe(t, s.gateway, tok, "Patient", healthy.URL+"/hook")

	started := time.Now()
	pid := s.create(t, tok, "Patient", `{"resourceType":"Patient","name":[{"family":"Unlucky"}]}`)
	var sub map[string]any
	// Backoff is 1 s then 2 s between the three attempts.
	within(t, "the failing Subscription switched off", started, 60*time.Second, func() bool {
		sub = do(t, "GET", s.gateway+"/fhir/R4/Subscription/"+failingSub, "", "", bearer(tok)...).json(t)
		return sub["status"] != "active"
	})
	// The last attempt is made before the switch, and no attempt after it.
	attempts := failing.requests()
	if errText, _ := sub["error"].(string); sub["status"] != "off" || !strings.Contains(errText, "delivery failed 3 times") || !strings.Contains(errText, "received status 500") {
		t.Fatalf("the Subscription after its failures: status %v, error %q", sub["status"], errText)
	}
	if len(attempts) != 3 {
		t.Fatalf("the endpoint got %d attempts, want 3", len(attempts))
	}
	for i, a := range attempts {
		if a.subscription != failingSub || a.body["id"] != pid {
			t.Fatalf("attempt %d: %+v, want Patient/%s from Subscription/%s", i+1, a, pid, failingSub)
		}
	}
	// AuditEvents are written in background batches, so the last
	// attempt's may land a moment after the switch-off.
	var audited []string
	within(t, "the attempts' AuditEvents", time.Now(), 10*time.Second, func() bool {
		audited = audited[:0]
		for _, ev := range s.auditResources(t, "project=alpha") {
			if got := entities(ev); len(got) == 2 && got[0] == "Subscription/"+failingSub && got[1] == "Patient/"+pid {
				outcome, _ := ev["outcome"].(string)
				desc, _ := ev["outcomeDesc"].(string)
				audited = append(audited, outcome+" "+desc)
			}
		}
		return len(audited) >= 3
	})
	slices.Sort(audited)
	if want := []string{"4 Attempt 1: received status 500", "4 Attempt 2: received status 500", "4 Attempt 3: received status 500"}; !slices.Equal(audited, want) {
		t.Fatalf("the attempts' AuditEvents: %q, want %q", audited, want)
	}

	// Off: the next Patient is not delivered to it. Its deliveries are
	// enqueued together and the queue takes due jobs earliest first, so
	// once the healthy endpoint has the Patient written after that one, a
	// delivery to the switched-off Subscription would have left the queue.
	var want []any
	for _, family := range []string{"Later", "Last"} {
		want = append(want, s.create(t, tok, "Patient", `{"resourceType":"Patient","name":[{"family":"`+family+`"}]}`))
		got := healthy.waitFor(t, "the healthy endpoint's delivery of "+family, len(want)+1)
		if last := got[len(got)-1]; last.body["id"] != want[len(want)-1] {
			t.Fatalf("the healthy endpoint got %+v, want Patient/%v", last, want[len(want)-1])
		}
	}
	if got := healthy.requests(); len(got) != 3 || got[0].body["id"] != pid {
		t.Fatalf("the healthy endpoint got %+v, want the three Patients once each", got)
	}
	if n := len(failing.requests()); n != 3 {
		t.Fatalf("the switched-off Subscription's endpoint got %d requests, want the 3 attempts", n)
	}
}
