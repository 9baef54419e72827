package riverqueue

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
)

// TestDeferredTxTurnsSynchronousCommitOff: the Deferred Enqueues'
// transaction has synchronous_commit off, and the connection goes back to
// the pool with it on.
func TestDeferredTxTurnsSynchronousCommitOff(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgkvtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tx, err := pool.BeginTx(ctx, deferredTx)
	if err != nil {
		t.Fatal(err)
	}
	var inside, after string
	if err := tx.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&inside); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if inside != "off" || after != "on" {
		t.Fatalf("synchronous_commit %q in the transaction, %q after; want off, on", inside, after)
	}
}
