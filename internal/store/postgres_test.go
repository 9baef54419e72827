package store_test

import (
	"context"
	"os"
	"testing"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/badgerkv"
	"github.com/fhirgate/fhirgate/internal/store/pgkv"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
)

// StoreTestKVEnv names the environment variable that puts the resource
// layer's tests on another KV: "postgres" runs them on PostgreSQL (a fresh
// schema per test, see pgkvtest); unset or "badger" keeps Badger.
const storeTestKVEnv = "FHIRGATE_STORE_TEST_KV"

func TestMain(m *testing.M) {
	store.OpenTestBadger = func(dir string) (store.KV, error) {
		return badgerkv.Open(badgerkv.Options{Dir: dir})
	}
	switch kv := os.Getenv(storeTestKVEnv); kv {
	case "", "badger":
	case "postgres":
		store.OpenTestStoreKV = func(tb testing.TB) store.KV {
			tb.Helper()
			kv, err := pgkv.Open(context.Background(), pgkv.Options{DSN: pgkvtest.DSN(tb)})
			if err != nil {
				tb.Fatalf("opening PostgreSQL storage: %v", err)
			}
			tb.Cleanup(func() { _ = kv.Close() })
			return kv
		}
	default:
		os.Stderr.WriteString(storeTestKVEnv + " must be badger or postgres, not " + kv + "\n")
		os.Exit(2)
	}
	os.Exit(pgkvtest.Main(m))
}
