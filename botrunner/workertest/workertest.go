// Package workertest lets a package's tests start real bot worker and compile processes: the
// package's test binary doubles as them. In the package's tests:
//
//	func TestMain(m *testing.M) { workertest.Main(m) }
//
// and give a Pool or a Compiler workertest.Command() (workertest.Compiler does). A binary
// that serves bots for the gateway in production is the Caddy binary's hidden
// `caddy fhirgate bot-worker` command, not this.
package workertest

import (
	"fmt"
	"os"
	"testing"

	"github.com/fhirgate/fhirgate/botrunner"
)

// Main runs the tests, or, in a process that a Pool or Compiler of the tests started (botrunner
// marks its environment), serves that pool or compiler and exits.
func Main(m *testing.M) {
	if botrunner.IsWorkerProcess() {
		if err := botrunner.ServeWorker(); err != nil {
			fmt.Fprintln(os.Stderr, "bot worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Command starts this test binary as a worker or compile process: it runs no test, and Main
// serves the process.
func Command() []string { return []string{os.Args[0], "-test.run=^$"} }

// Compiler returns a Compiler whose processes are this test binary.
func Compiler(tb testing.TB) *botrunner.Compiler {
	tb.Helper()
	c, err := botrunner.NewCompiler(botrunner.CompilerOptions{Command: Command()})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
