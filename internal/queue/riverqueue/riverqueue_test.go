package riverqueue_test

import (
	"context"
	"os"
	"testing"

	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/queue/queuetest"
	"github.com/fhirgate/fhirgate/internal/queue/riverqueue"
	"github.com/fhirgate/fhirgate/internal/queue/riverqueue/riverqueuetest"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/pgkv"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
)

const envDSN = "RIVERQUEUE_TEST_DSN"

var backend = queuetest.Backend{
	NewStore: func(t *testing.T) queuetest.Store {
		return &pgStore{t: t, dsn: pgkvtest.DSN(t)}
	},
	OpenChild: func(o queue.Options) (queue.Queue, error) {
		ctx := context.Background()
		kv, err := pgkv.Open(ctx, pgkv.Options{DSN: os.Getenv(envDSN), SweepInterval: -1})
		if err != nil {
			return nil, err
		}
		return riverqueue.New(ctx, kv.Pool(), pgkv.PgxTx, o, nil)
	},
	Replicas: true,
}

func TestMain(m *testing.M) {
	if queuetest.InChild() {
		os.Exit(queuetest.Main(m, backend))
	}
	os.Exit(pgkvtest.Main(m))
}

func TestConformance(t *testing.T) { queuetest.Run(t, backend) }

// pgStore is a fresh schema of the run's database; each queue opened on
// it is a replica with its own pool.
type pgStore struct {
	t   *testing.T
	dsn string
	kv  *pgkv.KV // the first replica's, for Update
}

func (s *pgStore) Open(t *testing.T, o queue.Options) queue.Queue {
	kv, q := riverqueuetest.Open(t, s.dsn, o)
	if s.kv == nil {
		s.kv = kv
	}
	return q
}

func (s *pgStore) Update(ctx context.Context, fn func(store.Txn) error) error {
	return s.kv.Update(ctx, fn)
}

func (s *pgStore) ChildEnv() []string { return []string{envDSN + "=" + s.dsn} }

// Close and Reopen have nothing to do: replicas share the database.
func (s *pgStore) Close(*testing.T)  {}
func (s *pgStore) Reopen(*testing.T) {}
