package kvqueue_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/queue/kvqueue"
	"github.com/fhirgate/fhirgate/internal/queue/queuetest"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/badgerkv"
)

const envDir = "KVQUEUE_TEST_DIR"

var backend = queuetest.Backend{
	NewStore: func(t *testing.T) queuetest.Store {
		s := &badgerStore{dir: t.TempDir()}
		s.Reopen(t)
		t.Cleanup(func() { s.Close(t) })
		return s
	},
	OpenChild: func(o queue.Options) (queue.Queue, error) {
		db, err := badgerkv.Open(badgerkv.Options{Dir: os.Getenv(envDir)})
		if err != nil {
			return nil, err
		}
		return kvqueue.New(db, o, nil), nil
	},
}

func TestMain(m *testing.M) { os.Exit(queuetest.Main(m, backend)) }

func TestConformance(t *testing.T) { queuetest.Run(t, backend) }

// badgerStore is a real Badger directory.
type badgerStore struct {
	dir    string
	db     *badgerkv.KV
	queues []queue.Queue
}

func (s *badgerStore) Open(t *testing.T, o queue.Options) queue.Queue {
	q := kvqueue.New(s.db, o, nil)
	s.queues = append(s.queues, q)
	return q
}

func (s *badgerStore) Update(ctx context.Context, fn func(store.Txn) error) error {
	return s.db.Update(ctx, fn)
}

func (s *badgerStore) ChildEnv() []string { return []string{envDir + "=" + s.dir} }

func (s *badgerStore) Close(t *testing.T) {
	for _, q := range s.queues {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = q.Stop(ctx)
		cancel()
	}
	s.queues = nil
	if s.db != nil {
		if err := s.db.Close(); err != nil {
			t.Error(err)
		}
		s.db = nil
	}
}

func (s *badgerStore) Reopen(t *testing.T) {
	db, err := badgerkv.Open(badgerkv.Options{Dir: s.dir})
	if err != nil {
		t.Fatal(err)
	}
	s.db = db
}
