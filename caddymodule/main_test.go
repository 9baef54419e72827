package caddymodule

import (
	"os"
	"testing"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/botrunner/workertest"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
)

// TestMain doubles as the bot compile and worker processes an App provisioned in a test starts
// (os.Executable, this test binary); a test run drops the PostgreSQL database its tests made.
func TestMain(m *testing.M) {
	if botrunner.IsWorkerProcess() {
		workertest.Main(m) // serves the process and exits
	}
	os.Exit(pgkvtest.Main(m))
}

// testCompiler returns a bot Compiler whose processes are this test binary.
func testCompiler(t *testing.T) *botrunner.Compiler { return workertest.Compiler(t) }
