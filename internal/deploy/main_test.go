package deploy

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/fhirgate/fhirgate/botrunner"
)

// TestMain doubles as the compile process: the tests' Compiler starts this test binary, and
// botrunner marks its environment (FHIRGATE_BOT_WORKER) so that it serves one compile.
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

// newCompiler returns a Compiler whose processes are this test binary.
func newCompiler(t *testing.T) *botrunner.Compiler {
	t.Helper()
	c, err := botrunner.NewCompiler(botrunner.CompilerOptions{Command: []string{os.Args[0], "-test.run=^$"}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// busyCompiler is a Compiler whose slots are all taken.
type busyCompiler struct{}

func (busyCompiler) Compile(context.Context, string, string, string) (*botrunner.Program, error) {
	return nil, fmt.Errorf("waiting: %w", botrunner.ErrCompileBusy)
}
