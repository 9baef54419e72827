package badgerkv_test

import (
	"testing"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/badgerkv"
	"github.com/fhirgate/fhirgate/internal/store/kvtest"
)

// dirBadger is a KV that remembers its directory, for Reopen.
type dirBadger struct {
	*badgerkv.KV
	dir string
}

func openBadger(t *testing.T, dir string) *dirBadger {
	t.Helper()
	kv, err := badgerkv.Open(badgerkv.Options{Dir: dir})
	if err != nil {
		t.Fatalf("opening badger: %v", err)
	}
	t.Cleanup(func() {
		if err := kv.Close(); err != nil {
			t.Errorf("closing badger: %v", err)
		}
	})
	return &dirBadger{KV: kv, dir: dir}
}

// TestConformance runs the KV contract against a real Badger in a temporary
// directory.
func TestConformance(t *testing.T) {
	t.Parallel()
	kvtest.Run(t, kvtest.Target{
		Open: func(t *testing.T) store.KV { return openBadger(t, t.TempDir()) },
		Reopen: func(t *testing.T, kv store.KV) store.KV {
			b := kv.(*dirBadger)
			if err := b.Close(); err != nil {
				t.Fatalf("closing badger: %v", err)
			}
			return openBadger(t, b.dir)
		},
	})
}
