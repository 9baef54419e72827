package botrunner

import (
	"fmt"
	"os"
	"testing"
)

// TestMain doubles as a bot worker: the pool tests start this test binary as their worker
// command, and the pool marks its workers' environment with workerEnv.
func TestMain(m *testing.M) {
	if IsWorkerProcess() { // workertest.Main, which cannot be imported here (a cycle)
		if err := ServeWorker(); err != nil {
			fmt.Fprintln(os.Stderr, "bot worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testWorkerCommand starts this binary as a worker; the flag keeps it from running tests
// should the switch above ever fail.
func testWorkerCommand() []string { return []string{os.Args[0], "-test.run=^$"} }
