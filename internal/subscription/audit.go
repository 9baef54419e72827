package subscription

import (
	"github.com/fhirgate/fhirgate/internal/store"
)

// audit records a delivery outcome as an AuditEvent naming the
// Subscription and the resource (Medplum's shape: outcome "0" success,
// "4" minor failure, "8" serious failure).
func (s *Service) audit(sub *store.Subscription, a *deliverArgs, outcome, desc string) {
	ev := &store.AuditEvent{
		Type:        store.Coding{System: "http://dicom.nema.org/resources/ontology/DCM", Code: "110100", Display: "Application Activity"},
		Outcome:     outcome,
		OutcomeDesc: desc,
		Source:      store.AuditEventSource{Observer: store.Reference{Reference: "Subscription/" + sub.ID}},
		Entity: []store.AuditEventEntity{
			{What: store.Reference{Reference: "Subscription/" + sub.ID}},
			{What: store.Reference{Reference: a.Change.Ref()}},
		},
	}
	ev.Meta.Project = sub.Meta.Project
	s.o.Bots.RecordAudit(ev)
}
