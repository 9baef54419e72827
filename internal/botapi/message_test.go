package botapi

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/store"
)

// TestRunMessageRunsTheBotAsItself: a message that arrived outside HTTP
// (MLLP) runs the bot by identifier or Bot/{id} within its project only,
// with the bot as requester and AuditEvent agent, its HL7 input parsed as
// for $execute, and its medplum calls reaching the backend as the bot
// through the request-less route.
func TestRunMessageRunsTheBotAsItself(t *testing.T) {
	f := newAPIFixture(t, Options{})
	bot := f.deployBot(t, &store.Bot{Name: "adt", Identifier: []store.Identifier{{System: "https://ex.org/bots", Value: "adt"}}},
		`exports.handler = async (medplum, event) => {
			if (event.input.getSegment('PID').getField(5).getComponent(1) === 'CALL') { await medplum.readResource('Patient', 'p1'); }
			return event.requester.reference + ' ' + event.input.getSegment('MSH').getField(9).getComponent(1) + ' ' + event.contentType;
		};`)
	const hl7 = "MSH|^~\\&|LAB|N|GW|C|20260101||ADT^A01|1|P|2.5.1\rPID|1||7||Doe^Jane"
	ctx := context.Background()
	for _, name := range []string{"https://ex.org/bots|adt", "adt", "Bot/" + bot.ID} {
		res, err := f.api.RunMessage(ctx, Message{Project: bot.Meta.Project, Bot: name, ContentType: "x-application/hl7-v2+er7", Body: []byte(hl7)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := "Bot/" + bot.ID + " ADT x-application/hl7-v2+er7"; string(res.Body) != want || resultStatus(res) != http.StatusOK {
			t.Fatalf("%s: %d %q, want %q", name, resultStatus(res), res.Body, want)
		}
	}

	res, err := f.api.RunMessage(ctx, Message{Project: bot.Meta.Project, Bot: "adt", ContentType: "x-application/hl7-v2+er7",
		Body: []byte(strings.Replace(hl7, "Doe^Jane", "CALL", 1))})
	if err != nil || resultStatus(res) != http.StatusOK {
		t.Fatalf("medplum call: %v %+v", err, res)
	}
	if reqs := f.backendRequests(); len(reqs) != 1 || reqs[0].Path != "/fhir/R4/Patient/p1" || reqs[0].Header.Get("X-Fhirgate-Profile") != "Bot/"+bot.ID {
		t.Fatalf("the backend got %+v, want the bot's read of Patient/p1", reqs)
	}

	_, err = f.api.RunMessage(ctx, Message{Project: "another", Bot: "Bot/" + bot.ID, ContentType: "x-application/hl7-v2+er7", Body: []byte(hl7)})
	if ferr := fhir.AsError(err); ferr == nil || ferr.Status != http.StatusNotFound {
		t.Fatalf("another project's bot: %v", err)
	}

	f.api.Shutdown()
	evs := f.auditEventsOf(t, bot.ID)
	if len(evs) != 4 {
		t.Fatalf("%d AuditEvents, want 4", len(evs))
	}
	for _, ev := range evs {
		if len(ev.Agent) != 1 || ev.Agent[0].Who.Reference != "Bot/"+bot.ID {
			t.Fatalf("agent %+v, want the bot", ev.Agent)
		}
	}
}

// TestRunMessageAuditEventNamesItsEntities: the AuditEvent of a message's
// run names the bot first, then what the message says the run was about
// (for a Subscription run, the Subscription and the resource), as
// Medplum's does.
func TestRunMessageAuditEventNamesItsEntities(t *testing.T) {
	f := newAPIFixture(t, Options{})
	bot := f.deployBot(t, &store.Bot{Name: "on-patient"}, `exports.handler = async (medplum, event) => event.input.id;`)
	res, err := f.api.RunMessage(context.Background(), Message{Project: bot.Meta.Project, Bot: "Bot/" + bot.ID,
		ContentType: "application/fhir+json", Body: []byte(`{"resourceType":"Patient","id":"p1"}`),
		Entity: []store.Reference{{Reference: "Subscription/s1"}, {Reference: "Patient/p1"}}})
	if err != nil || string(res.Body) != "p1" {
		t.Fatalf("run: %v %+v", err, res)
	}
	f.api.Shutdown()
	evs := f.auditEventsOf(t, bot.ID)
	if len(evs) != 1 {
		t.Fatalf("%d AuditEvents, want 1", len(evs))
	}
	var got []string
	for _, e := range evs[0].Entity {
		got = append(got, e.What.Reference)
	}
	if want := []string{"Bot/" + bot.ID, "Subscription/s1", "Patient/p1"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("entities %v, want %v", got, want)
	}
}
