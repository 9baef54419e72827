package pgkv

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
)

func auditEvent(project string) *store.AuditEvent {
	ev := &store.AuditEvent{
		Entity:  []store.AuditEventEntity{{What: store.Reference{Reference: "Bot/b1"}}},
		Outcome: "0", OutcomeDesc: strings.Repeat("x", 600),
	}
	ev.Base().Meta.Project = project
	return ev
}

// TestQuotaCountsOtherReplicasWrites: two gateways on one database, each
// with its own store: what one writes counts against the quota the other
// checks at once, not a second later.
func TestQuotaCountsOtherReplicasWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgkvtest.DSN(t)
	a := store.New(openKV(t, Options{DSN: dsn}), store.Options{})
	b := store.New(openKV(t, Options{DSN: dsn}), store.Options{})
	if err := b.Create(ctx, auditEvent("p"), store.PutOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	one, err := b.ProjectBotRecordBytes(ctx, "p")
	if err != nil || one == 0 {
		t.Fatalf("usage of one event: %d, %v", one, err)
	}
	quota := 10*one + one/2
	opts := store.PutOptions{TTL: time.Hour, ProjectQuota: quota}
	// B checks the quota now, with its usage read: one event.
	if err := b.Create(ctx, auditEvent("p"), opts); err != nil {
		t.Fatal(err)
	}
	// A fills the project to the quota.
	batch := make([]store.Resource, 8)
	for i := range batch {
		batch[i] = auditEvent("p")
	}
	if err := a.CreateAll(ctx, batch, opts); err != nil {
		t.Fatal(err)
	}
	// B's next event would take the project past it.
	var qe *store.QuotaError
	if err := b.Create(ctx, auditEvent("p"), opts); !errors.As(err, &qe) || qe.Used != 10*one {
		t.Fatalf("B's write past the quota A filled: %v, want a QuotaError at %d bytes", err, 10*one)
	}
	if used, _ := a.ProjectBotRecordBytes(ctx, "p"); used != 10*one {
		t.Fatalf("usage %d, want %d", used, 10*one)
	}
}
