package subscription

import (
	"os"
	"testing"

	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
)

// TestMain drops the PostgreSQL database of the benchmarks after the run.
func TestMain(m *testing.M) { os.Exit(pgkvtest.Main(m)) }
