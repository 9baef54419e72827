package caddymodule

import (
	"fmt"
	"os"
	"testing"

	"github.com/fhirgate/fhirgate/botrunner"
)

// TestMain doubles as the bot compile and worker processes: an App
// provisioned in a test starts this test binary (os.Executable) for both,
// and botrunner marks its environment (FHIRGATE_BOT_WORKER) so that it
// serves them.
func TestMain(m *testing.M) {
	if os.Getenv("FHIRGATE_BOT_WORKER") != "" {
		if err := botrunner.ServeWorker(); err != nil {
			fmt.Fprintln(os.Stderr, "bot worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testCompiler returns a bot Compiler whose processes are this test binary.
func testCompiler(t *testing.T) *botrunner.Compiler {
	t.Helper()
	c, err := botrunner.NewCompiler(botrunner.CompilerOptions{Command: []string{os.Args[0], "-test.run=^$"}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
