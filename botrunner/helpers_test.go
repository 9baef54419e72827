package botrunner

import (
	"context"
	"testing"
	"time"
)

// mustCompile compiles bot source or fails the test.
func mustCompile(t testing.TB, filename, src string) *Program {
	t.Helper()
	p, err := Compile(filename, src)
	if err != nil {
		t.Fatalf("Compile(%s): %v", filename, err)
	}
	return p
}

// mustInput parses a request body or fails the test.
func mustInput(t testing.TB, contentType, body string) Input {
	t.Helper()
	in, err := ParseInput(contentType, []byte(body))
	if err != nil {
		t.Fatalf("ParseInput(%q): %v", contentType, err)
	}
	return in
}

// ctxT is a context that ends with the test.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// runProgram runs a compiled bot once with a generous timeout.
func runProgram(t testing.TB, r *Runner, p *Program, ev Event) *Result {
	t.Helper()
	res, err := r.Run(ctxT(t), Request{
		CacheKey: t.Name(),
		Code:     p.JS,
		Filename: "index.ts",
		Timeout:  5 * time.Second,
		BotID:    "test",
		Event:    ev,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// run compiles TypeScript src and runs it once.
func run(t testing.TB, r *Runner, src string, ev Event) *Result {
	t.Helper()
	return runProgram(t, r, mustCompile(t, "index.ts", src), ev)
}

func jsonEvent(t testing.TB, body string) Event {
	t.Helper()
	return Event{
		Bot:         Reference{Reference: "Bot/123", Display: "Test bot"},
		ContentType: MediaJSON,
		Input:       mustInput(t, MediaJSON, body),
	}
}
