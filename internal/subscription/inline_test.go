package subscription

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/botapi"
	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/subscription/spec"
)

// errBusy is what botapi answers for a bot that could not start.
var errBusy = &fhir.Error{Status: http.StatusTooManyRequests, Message: "too many bot runs in progress; retry shortly"}

// refuseFirst is a botRecorder's refuse: the first message finds the
// bot busy, the others run.
func refuseFirst(try int, _ botapi.Message) error {
	if try == 1 {
		return errBusy
	}
	return nil
}

// createPatient writes a Patient through the gateway and returns its id.
func (f *fixture) createPatient(t *testing.T) string {
	t.Helper()
	status, body := f.do(t, "POST", "Patient", `{"resourceType":"Patient","name":[{"family":"Doe"}]}`)
	var created struct{ ID string }
	if status != 201 || json.Unmarshal(body, &created) != nil {
		t.Fatalf("create: %d %s", status, body)
	}
	return created.ID
}

// onlyTrigger waits for the write's one trigger job to complete.
func (f *fixture) onlyTrigger(t *testing.T) {
	t.Helper()
	triggers := f.q.jobs(TriggerKind)
	if len(triggers) != 1 {
		t.Fatalf("%d trigger jobs, want 1", len(triggers))
	}
	f.q.waitState(t, triggers[0].ID, queue.StateCompleted)
}

func TestBotSubscriptionsRunInTheirTriggerJobWithoutDeliveryJobs(t *testing.T) {
	onBothStores(t, func(t *testing.T, f *fixture) {
		const n = 3
		want := map[string]bool{}
		for range n {
			want["Subscription/"+f.subscribe(t, "Patient", "Bot/b1", nil).ID] = true
		}
		id := f.createPatient(t)
		f.onlyTrigger(t)
		runs := f.bots.messages()
		if len(runs) != n {
			t.Fatalf("%d bot runs when the trigger completed, want %d", len(runs), n)
		}
		for _, m := range runs {
			if !want[m.Entity[0].Reference] || m.Entity[1].Reference != "Patient/"+id {
				t.Fatalf("a run for %+v", m.Entity)
			}
			delete(want, m.Entity[0].Reference)
		}
		if jobs := f.q.jobs(DeliverKind); len(jobs) != 0 {
			t.Fatalf("%d delivery jobs enqueued for bots", len(jobs))
		}
		if got, lags := f.observed("delivered"), f.lagsObserved(); got != n || lags != n {
			t.Fatalf("%d delivered and %d lags observed, want %d", got, lags, n)
		}
	})
}

func TestWebhooksStillGoThroughDeliveryJobs(t *testing.T) {
	onBothStores(t, func(t *testing.T, f *fixture) {
		h := newHook(t, 200)
		hookSub := f.subscribe(t, "Patient", h.URL, nil)
		f.subscribe(t, "Patient", "Bot/b1", nil)
		f.createPatient(t)
		f.onlyTrigger(t)
		eventually(t, "the webhook", func() bool { return h.count() == 1 })
		jobs := f.q.jobs(DeliverKind)
		if len(jobs) != 1 || deliverArgsOf(t, jobs[0].Args).Subscription != hookSub.ID {
			t.Fatalf("delivery jobs %+v, want the webhook's only", jobs)
		}
		if runs := len(f.bots.messages()); runs != 1 {
			t.Fatalf("%d bot runs", runs)
		}
	})
}

func TestBotThatCannotStartIsDeliveredByAJobFromTheSecondAttempt(t *testing.T) {
	onBothStores(t, func(t *testing.T, f *fixture) {
		f.subscribe(t, "Patient", "Bot/b1", nil)
		f.bots.refuse = refuseFirst
		f.createPatient(t)
		eventually(t, "the retried delivery", func() bool { return len(f.bots.messages()) == 1 })
		jobs := f.q.jobs(DeliverKind)
		if len(jobs) != 1 {
			t.Fatalf("%d delivery jobs, want the retry", len(jobs))
		}
		if a := deliverArgsOf(t, jobs[0].Args); a.Attempted != 1 || jobs[0].MaxAttempts != botDeliverAttempts-1 || jobs[0].RunAt.IsZero() {
			t.Fatalf("the retry job: attempted %d, max attempts %d, run at %v", a.Attempted, jobs[0].MaxAttempts, jobs[0].RunAt)
		}
		eventually(t, "the delivery job's attempt", func() bool { return len(f.q.attemptsOf(DeliverKind)) == 1 })
		// Attempt 2: the lag is the first attempt's only.
		if tries, lags, retried := f.bots.triesSoFar(), f.lagsObserved(), f.observed("retried"); tries != 2 || lags != 1 || retried != 1 {
			t.Fatalf("%d tries, %d lags observed, %d retried", tries, lags, retried)
		}
	})
}

func TestRetriedBotDeliveryDropsAResourceThatMovedOn(t *testing.T) {
	onBothStores(t, func(t *testing.T, f *fixture) {
		f.subscribe(t, "Patient", "Bot/b1", nil)
		f.bots.refuse = func(try int, m botapi.Message) error {
			if try > 1 {
				return nil
			}
			// While the bot is busy, the resource gets a new version.
			var p struct{ ID string }
			_ = json.Unmarshal(m.Body, &p)
			req, _ := http.NewRequest("PUT", f.fhir.URL+"/fhir/R4/Patient/"+p.ID, strings.NewReader(`{"resourceType":"Patient"}`))
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != 200 {
				t.Errorf("updating Patient/%s: %v %v", p.ID, resp, err)
			}
			if resp != nil {
				_ = resp.Body.Close()
			}
			return errBusy
		}
		f.createPatient(t)
		eventually(t, "the retry", func() bool { return len(f.q.attemptsOf(DeliverKind)) == 1 })
		if got := f.q.attemptsOf(DeliverKind)[0]; got.Err != nil || f.observed("dropped") != 1 || len(f.bots.messages()) != 0 {
			t.Fatalf("the retry returned %v, %d dropped, %d runs", got.Err, f.observed("dropped"), len(f.bots.messages()))
		}
	})
}

func TestBotThatNeverStartsGivesUpAfterBotDeliverAttempts(t *testing.T) {
	onBothStores(t, func(t *testing.T, f *fixture) {
		f.subscribe(t, "Patient", "Bot/b1", nil)
		f.bots.refuse = func(int, botapi.Message) error { return errBusy }
		f.createPatient(t)
		f.onlyTrigger(t)
		eventually(t, "the retry job's first attempt", func() bool { return len(f.q.attemptsOf(DeliverKind)) > 0 })
		f.q.waitState(t, f.q.attemptsOf(DeliverKind)[0].ID, queue.StateDiscarded)
		if tries := f.bots.triesSoFar(); tries != botDeliverAttempts {
			t.Fatalf("%d tries, want %d", tries, botDeliverAttempts)
		}
		for i, a := range f.q.attemptsOf(DeliverKind) {
			if a.Attempt != i+1 || a.MaxAttempts != botDeliverAttempts-1 || a.Err == nil {
				t.Fatalf("the retry job's attempt %d: %+v", i+1, a)
			}
		}
	})
}

func TestMatchingErrorRunsNoBotAndRetriesTheTrigger(t *testing.T) {
	onBothStores(t, func(t *testing.T, f *fixture) {
		f.subscribe(t, "Patient?family=Doe", "Bot/b1", nil)
		// The second change's search fails: the first one's matched already.
		f.failSearch.Store(2)
		var runsAtFailure atomic.Int32
		runsAtFailure.Store(-1)
		f.q.returned = func(d *queue.Delivery, err error) {
			if d.Kind == TriggerKind && d.Attempt == 1 {
				runsAtFailure.Store(int32(len(f.bots.messages())))
			}
		}
		entry := `{"resource":{"resourceType":"Patient","name":[{"family":"Doe"}]},"request":{"method":"POST","url":"Patient"}}`
		if status, body := f.do(t, "POST", "", `{"resourceType":"Bundle","type":"transaction","entry":[`+entry+`,`+entry+`]}`); status != 200 {
			t.Fatalf("transaction: %d %s", status, body)
		}
		f.onlyTrigger(t)
		attempts := f.q.attemptsOf(TriggerKind)
		if len(attempts) != 2 || attempts[0].Err == nil || attempts[1].Err != nil {
			t.Fatalf("trigger attempts %+v", attempts)
		}
		if n := runsAtFailure.Load(); n != 0 || len(f.bots.messages()) != 2 {
			t.Fatalf("%d bot runs when matching failed, %d in all; want 0 and 2", n, len(f.bots.messages()))
		}
	})
}

func TestBotsLeftWhenTheTriggersTimeRunsShortGoToDeliveryJobs(t *testing.T) {
	onBothStores(t, func(t *testing.T, f *fixture) {
		for range 2 {
			f.subscribe(t, "Patient", "Bot/b1", nil)
		}
		a := &triggerArgs{Route: "short", Project: f.project, Writer: writer{Project: f.project, Profile: "Practitioner/alice"}, At: time.Now(),
			Changes: []spec.Change{{Interaction: spec.Create, Type: "Patient", ID: "p1", Version: "1", Resource: json.RawMessage(`{"resourceType":"Patient","id":"p1"}`)}}}
		// Less time left than the longest bot run.
		ctx, cancel := context.WithTimeout(context.Background(), botRunBound/2)
		defer cancel()
		if err := f.svc.match(ctx, a); err != nil {
			t.Fatal(err)
		}
		jobs := f.q.jobs(DeliverKind)
		if len(jobs) != 2 {
			t.Fatalf("%d delivery jobs, want 2", len(jobs))
		}
		for _, j := range jobs {
			if da := deliverArgsOf(t, j.Args); da.Attempted != 0 || j.MaxAttempts != botDeliverAttempts || !j.RunAt.IsZero() {
				t.Fatalf("a handed-over delivery: attempted %d, max attempts %d, run at %v", da.Attempted, j.MaxAttempts, j.RunAt)
			}
		}
		eventually(t, "the delivery jobs", func() bool { return len(f.q.attemptsOf(DeliverKind)) == 2 })
		if tries, lags := f.bots.triesSoFar(), f.lagsObserved(); tries != 2 || lags != 2 {
			t.Fatalf("%d tries, %d lags observed; want 2 first attempts", tries, lags)
		}
	})
}

func TestTriggerWhoseBotRetryCannotBeEnqueuedRunsAgain(t *testing.T) {
	onBothStores(t, func(t *testing.T, f *fixture) {
		f.subscribe(t, "Patient", "Bot/b1", nil)
		f.bots.refuse = refuseFirst
		f.q.failBatches.Store(1) // the retry's enqueue
		f.createPatient(t)
		f.onlyTrigger(t)
		attempts := f.q.attemptsOf(TriggerKind)
		if len(attempts) != 2 || attempts[0].Err == nil || attempts[1].Err != nil {
			t.Fatalf("trigger attempts %+v", attempts)
		}
		// The second attempt ran the bot itself.
		if runs, jobs := len(f.bots.messages()), f.q.jobs(DeliverKind); runs != 1 || len(jobs) != 0 {
			t.Fatalf("%d runs, delivery jobs %+v", runs, jobs)
		}
	})
}

func TestDeliveryJobWithoutAttemptedRunsAsTheFirstAttempt(t *testing.T) {
	onBothStores(t, func(t *testing.T, f *fixture) {
		sub := f.subscribe(t, "Patient", "Bot/b1", nil)
		// A delivery job as a trigger enqueued it before bots ran inline:
		// no "attempted"; it delivers the version it carries, first attempt.
		raw := `{"subscription":"` + sub.ID + `","route":"r","writer":{"project":"` + f.project + `","profile":"Practitioner/alice"},"at":"` + time.Now().Format(time.RFC3339Nano) + `",` +
			`"change":{"interaction":"create","type":"Patient","id":"old","version":"1","resource":{"resourceType":"Patient","id":"old"}}}`
		if _, err := f.q.Enqueue(context.Background(), queue.Job{Kind: DeliverKind, Args: json.RawMessage(raw), MaxAttempts: botDeliverAttempts}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the delivery", func() bool { return len(f.bots.messages()) == 1 })
		if m := f.bots.messages()[0]; !strings.Contains(string(m.Body), `"old"`) {
			t.Fatalf("delivered %s", m.Body)
		}
		eventually(t, "the delivery job's attempt", func() bool { return len(f.q.attemptsOf(DeliverKind)) == 1 })
		if lags := f.lagsObserved(); lags != 1 {
			t.Fatalf("%d lags observed", lags)
		}
	})
}

// TestBotMessagesCarryTheWriteAndTheSubscription pins what each bot of a
// trigger is given, field by field: the resource written, the
// Subscription's headers (its channel header included), the trace, the
// writer as caller and the Subscription and resource as entities. The
// trigger builds the deliveries' arguments and the caller's identity once
// for all its bots; each must still see its own Subscription's.
func TestBotMessagesCarryTheWriteAndTheSubscription(t *testing.T) {
	f := newFixture(t)
	subs := map[string]*store.Subscription{}
	for _, header := range []string{"", "X-Tenant: north"} {
		s := f.subscribe(t, "Patient", "Bot/b1", nil)
		if header != "" {
			s.Channel.Header = []string{header}
			if _, err := f.st.Put(context.Background(), s, store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		subs["Subscription/"+s.ID] = s
	}
	id := f.createPatient(t)
	f.onlyTrigger(t)
	var trigger triggerArgs
	if err := json.Unmarshal(f.q.jobs(TriggerKind)[0].Args, &trigger); err != nil {
		t.Fatal(err)
	}
	w := trigger.Writer
	runs := f.bots.messages()
	if len(runs) != len(subs) {
		t.Fatalf("%d bot runs, want %d", len(runs), len(subs))
	}
	for _, m := range runs {
		s := subs[m.Entity[0].Reference]
		if s == nil {
			t.Fatalf("a run for %+v", m.Entity)
		}
		header := http.Header{"Content-Type": {"application/fhir+json"}, "X-Medplum-Subscription": {s.ID}, "X-Medplum-Interaction": {"create"}}
		if len(s.Channel.Header) > 0 {
			header["X-Tenant"] = []string{"north"}
		}
		if trigger.Trace != "" {
			header["Traceparent"] = []string{trigger.Trace}
		}
		want := botapi.Message{
			Project:     f.project,
			Bot:         "Bot/b1",
			ContentType: "application/fhir+json",
			Body:        trigger.Changes[0].Resource,
			Header:      header,
			TraceID:     trigger.Trace,
			Caller:      &oauth.Identity{UserID: w.User, Profile: w.Profile, ClientID: w.Client, Scope: w.Scope, Patient: w.Patient, ProjectID: w.Project},
			Entity:      []store.Reference{{Reference: "Subscription/" + s.ID}, {Reference: "Patient/" + id}},
		}
		if w.Project != f.project || w.Profile == "" || len(want.Body) == 0 {
			t.Fatalf("the trigger's writer %+v or resource %s", w, want.Body)
		}
		if !reflect.DeepEqual(m, want) {
			t.Fatalf("bot message\n got %+v\nwant %+v", m, want)
		}
	}
}
