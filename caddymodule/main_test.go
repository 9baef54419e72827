package caddymodule

import (
	"testing"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/botrunner/workertest"
)

// TestMain doubles as the bot compile and worker processes an App provisioned in a test starts
// (os.Executable, this test binary).
func TestMain(m *testing.M) { workertest.Main(m) }

// testCompiler returns a bot Compiler whose processes are this test binary.
func testCompiler(t *testing.T) *botrunner.Compiler { return workertest.Compiler(t) }
