package botrunner

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// echoBot is the trivial bot of the isolation decision (docs/bots.md, "Why `process` is the default"): it returns
// its FHIR JSON input.
const echoBot = `exports.handler = async (medplum, event) => event.input;`

func echoRequest(b *testing.B) Request {
	b.Helper()
	p := mustCompile(b, "index.js", echoBot)
	ev := Event{ContentType: MediaFHIR, Input: mustInput(b, MediaFHIR, `{"resourceType":"Patient","id":"1","name":[{"given":["A"],"family":"B"}]}`)}
	return Request{CacheKey: "bench", Code: p.JS, Filename: "index.js", Event: ev}
}

// benchEcho runs the echo bot on e from goroutines×GOMAXPROCS goroutines (0: one at a time),
// in the default runtime.
func benchEcho(b *testing.B, e Executor, goroutines int) {
	b.Helper()
	benchEchoIn(b, e, goroutines, "")
}

// benchEchoIn is benchEcho in the given runtime.
func benchEchoIn(b *testing.B, e Executor, goroutines int, runtime string) {
	b.Helper()
	req := echoRequest(b)
	req.Runtime = runtime
	benchRuns(b, e, goroutines, req)
}

// benchRuns runs req on e from goroutines×GOMAXPROCS goroutines (0: one at a time), reporting
// the CPU time of the process and its workers per run beside the wall time.
func benchRuns(b *testing.B, e Executor, goroutines int, req Request) {
	b.Helper()
	ctx := context.Background()
	run := func() bool {
		res, err := e.Run(ctx, req)
		if err != nil || res.Outcome != OutcomeSuccess {
			b.Errorf("%+v, %v", res, err)
			return false
		}
		return true
	}
	if !run() { // warm up: start a worker, cache the program
		return
	}
	if goroutines > 0 { // start the workers a parallel run needs before measuring
		done := make(chan bool)
		for range goroutines * runtimeProcs() {
			go func() { done <- run() }()
		}
		for range goroutines * runtimeProcs() {
			<-done
		}
	}
	cpuBefore := cpuTime(e)
	b.ReportAllocs()
	b.ResetTimer()
	defer func() {
		// CPU time of the gateway and its workers per run: what bounds throughput on a busy
		// machine, where wall-clock time per run is noisy.
		b.ReportMetric(float64((cpuTime(e)-cpuBefore).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}()
	if goroutines == 0 {
		for b.Loop() {
			if !run() {
				return
			}
		}
		return
	}
	b.SetParallelism(goroutines)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !run() {
				return
			}
		}
	})
}

// BenchmarkEchoRuntimes is one echo run at a time in each runtime, in process and in workers:
// awslambda calls the warm instance's handler, vmcontext builds a runtime and loads the module.
func BenchmarkEchoRuntimes(b *testing.B) {
	for _, isolation := range []string{"inprocess", "process"} {
		for _, runtime := range []string{RuntimeAWSLambda, RuntimeVMContext} {
			b.Run(isolation+"/"+runtime, func(b *testing.B) {
				var e Executor = New(Options{})
				if isolation == "process" {
					e = newBenchPool(b, false)
				}
				benchEchoIn(b, e, 0, runtime)
			})
		}
	}
}

// hl7AckBot is scenario 7's bot (cmd/fhirgate-bench): it answers a message with its ACK.
const hl7AckBot = `exports.handler = async (medplum, event) => event.input.buildAck();`

// hl7AckInput is scenario 7's message.
const hl7AckInput = "MSH|^~\\&|LAB|NORTH|EHR|CLINIC|20260101120000||ORU^R01^ORU_R01|BENCH1|P|2.5.1\r" +
	"PID|1||123^^^MRN||DOE^JANE||19800101|F\r" +
	"OBR|1||LAB1|8867-4^Heart rate^LN\r" +
	"OBX|1|NM|8867-4^Heart rate^LN||72|/min|||||F"

// BenchmarkHL7Ack is scenario 7's ACK bot, one run at a time in the default runtime, in
// process and in a worker.
func BenchmarkHL7Ack(b *testing.B) {
	for _, isolation := range []string{"inprocess", "process"} {
		b.Run(isolation, func(b *testing.B) {
			var e Executor = New(Options{})
			if isolation == "process" {
				e = newBenchPool(b, false)
			}
			p := mustCompile(b, "index.js", hl7AckBot)
			ev := Event{ContentType: MediaHL7, Input: mustInput(b, MediaHL7, hl7AckInput)}
			benchRuns(b, e, 0, Request{CacheKey: "bench-hl7", Code: p.JS, Filename: "index.js", Event: ev})
		})
	}
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// cpuTime is the user and system CPU time this process and, for a pool, its live workers
// have used, as /proc counts it (in clock ticks).
func cpuTime(e Executor) time.Duration {
	pids := []string{"self"}
	if p, ok := e.(*Pool); ok {
		p.mu.Lock()
		for _, w := range p.idle {
			pids = append(pids, strconv.Itoa(w.pid))
		}
		for w := range p.busy {
			pids = append(pids, strconv.Itoa(w.pid))
		}
		p.mu.Unlock()
	}
	var ticks int64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		// After the command: state(0) ... utime(11) stime(12).
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ is 100 on Linux
}

// benchParallelism are the loads measured: one run at a time, GOMAXPROCS runs at once, and
// 4×GOMAXPROCS (the default MaxConcurrent).
var benchParallelism = []int{0, 1, 4}

func parallelismName(n int) string {
	if n == 0 {
		return "Sequential"
	}
	return fmt.Sprintf("Parallel%dxCPU", n)
}

// BenchmarkRunEchoParallel is the in-process side of BenchmarkPoolEcho.
func BenchmarkRunEchoParallel(b *testing.B) {
	for _, n := range benchParallelism {
		b.Run(parallelismName(n), func(b *testing.B) {
			benchEcho(b, New(Options{}), n)
		})
	}
}

// BenchmarkPoolEcho is the echo bot in worker processes (this test binary as the worker).
// AlwaysSendCode sends the code with every run instead of its digest, to show what the
// worker-side program cache saves.
func BenchmarkPoolEcho(b *testing.B) {
	for _, n := range benchParallelism {
		b.Run(parallelismName(n), func(b *testing.B) {
			benchEcho(b, newBenchPool(b, false), n)
		})
	}
	b.Run("AlwaysSendCode", func(b *testing.B) {
		benchEcho(b, newBenchPool(b, true), 1)
	})
}

func newBenchPool(b *testing.B, alwaysSendCode bool) *Pool {
	b.Helper()
	p, err := NewPool(PoolOptions{Command: testWorkerCommand()})
	if err != nil {
		b.Fatal(err)
	}
	p.alwaysSendCode = alwaysSendCode
	b.Cleanup(func() { _ = p.Close() })
	return p
}
