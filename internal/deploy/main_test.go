package deploy

import (
	"context"
	"fmt"
	"testing"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/botrunner/workertest"
)

// TestMain doubles as the compile process the tests' Compiler starts.
func TestMain(m *testing.M) { workertest.Main(m) }

// newCompiler returns a Compiler whose processes are this test binary.
func newCompiler(t testing.TB) *botrunner.Compiler { return workertest.Compiler(t) }

// busyCompiler is a Compiler whose slots are all taken.
type busyCompiler struct{}

func (busyCompiler) Compile(context.Context, string, string, string) (*botrunner.Program, error) {
	return nil, fmt.Errorf("waiting: %w", botrunner.ErrCompileBusy)
}
