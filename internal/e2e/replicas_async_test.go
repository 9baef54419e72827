package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// asyncAcrossReplicas: an async $execute accepted by replica A (of the
// bot at echoB, B's URL of it, as A's) completes when polled on B, and
// River's table shows it ran as a queue job, completed.
func (rp *replicaPair) asyncAcrossReplicas(t *testing.T, echoB, token string) {
	t.Helper()
	echoA := strings.Replace(echoB, rp.b.gateway, rp.a.gateway, 1)
	r := do(t, "POST", echoA, "text/plain", "queued", append(bearer(token), "Prefer", "respond-async")...)
	loc := r.header.Get("Content-Location")
	if r.status != 202 || loc == "" {
		t.Fatalf("async $execute on A: %d %s", r.status, r.body)
	}
	onB := strings.Replace(loc, rp.a.gateway, rp.b.gateway, 1)
	job := pollJob(t, onB, bearer(token), "completed")
	if out := mustJSON(t, job["output"]); !strings.Contains(out, "queued") {
		t.Fatalf("job polled on B: %s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, rp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	jobID := strings.TrimSuffix(loc[strings.Index(loc, "/job/")+len("/job/"):], "/status")
	// River marks a job completed after its worker returned, and the
	// worker returns after the run recorded its end: poll for it.
	var state string
	deadline := time.Now().Add(5 * time.Second)
	for {
		err = conn.QueryRow(ctx, `SELECT state FROM river_job WHERE kind = 'bot.async_execute' AND args->'payload'->>'job' = $1`, jobID).Scan(&state)
		if (err == nil && state == "completed") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || state != "completed" {
		t.Fatalf("River's job of the async run: %q, %v", state, err)
	}
}
