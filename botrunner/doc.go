// Package botrunner runs Medplum-compatible bots (JavaScript or TypeScript handlers) with goja,
// in the gateway's process or in worker processes: it compiles bot source, parses $execute
// request bodies into event.input, runs the handler with a deadline — in a warm instance of the
// bot version (Medplum's awslambda runtime) or a fresh sandbox (vmcontext); see
// Request.Runtime — and maps what it returns (or throws) to an HTTP answer. It does not import
// Caddy.
//
// # Use
//
//	c, err := botrunner.NewCompiler(botrunner.CompilerOptions{Command: workerCommand}) // once
//	prog, err := c.Compile(ctx, project, "index.ts", source) // at $deploy, in a child process:
//	// *CompileError (answer 400) names line and column, or the limit that stopped the compile
//	store(prog.JS) // the executable code
//
//	r := botrunner.New(botrunner.Options{})            // once
//	in, err := botrunner.PrepareInput(contentType, body) // *InputError: answer err.Status (415)
//	res, err := r.Run(ctx, botrunner.Request{
//		CacheKey: botID + "@" + versionID, Code: prog.JS, BotID: botID,
//		Event:   botrunner.Event{Bot: ..., ContentType: contentType, Input: in, ...},
//		Medplum: backendClient,                       // serves the handler's medplum argument
//	})
//	// err: ErrBusy (answer 429 + Retry-After), an *InputError (the body, parsed once the run
//	// holds its slot, does not parse: answer err.Status), or the context's error.
//	// res.Outcome success → 200, else 400; write res.ContentType and res.Body either way.
//
// # Compiling
//
// esbuild turns TypeScript, ESM and CommonJS into CommonJS with an inline source map, lowering the
// few things goja cannot parse (async generators, for await, dynamic import). Imports of
// '@medplum/core' become require calls the sandbox answers; type-only imports vanish. The runner
// compiles that JavaScript for goja once per Request.CacheKey and keeps the result in a bounded
// LRU cache. Only inline source maps are read, never a path named by a sourceMappingURL comment.
//
// Compile is the pure function; a Compiler runs it in a short-lived child process (the worker
// command, told by its environment to compile one source and exit), because neither parser can
// be trusted with hostile source on the gateway's stack: deep nesting overflows the Go stack
// (a fatal, unrecoverable error) and goja's compiler cannot be interrupted (100,000 terms of
// 1+1+… take it some 40 s). The child has a worker's environment, 64 MiB goroutine stacks and a
// memory cap, and is killed at the compile timeout; compiles are bounded overall and per
// project. A Runner given the Compiler (Options.Compiler) checks code it has not seen compiled in
// a child before compiling it in its own process on a cache miss.
//
// # The sandbox
//
// Every run gets a new goja runtime. The handler may be exported as exports.handler,
// module.exports.handler, module.exports = {handler}, module.exports = handler, an ESM named export
// `handler`, or a default export that is or holds the handler (Medplum accepts only the first two).
// It is called as handler(medplum, event), synchronous or async.
//
// Globals: console (log, info, warn, error, debug, trace, dir, assert; captured, the last
// MaxConsoleBytes kept, lines of methods other than log and dir prefixed with their level), URL,
// URLSearchParams, TextEncoder, TextDecoder, ContentType, Hl7Message, Hl7Segment, Hl7Field,
// Hl7Context, Node's Buffer (buffer.go), setTimeout, setInterval, setImmediate, their clear
// functions and queueMicrotask (timers.go), structuredClone, atob, btoa, crypto (webcrypto.go),
// Intl for en-US (intl*.go; Date's and Number's toLocale*String use it), and require, which
// answers '@medplum/core' (and '@medplum/fhirtypes', an empty object), 'buffer', 'crypto'
// (nodecrypto.go), 'timers' and 'timers/promises' (also as 'node:…'), 'node-fetch' and
// 'form-data' (see Fetch) and throws "Cannot find module 'x' (…)" otherwise. There is no
// process or filesystem: the only ways out are the medplum argument and fetch. Globals are
// built on first use, so a run pays only for what it touches.
//
// Timers run on an event loop of the run's own, on the run's goroutine: a handler whose promise
// is pending when it returns waits there for its timers until the promise settles; then the run
// ends and its pending timers are dropped, so none fires in a later run of a warm instance. A
// run waiting on timers is stopped at its deadline as any other.
//
// # Fetch
//
// fetch, Request, Response, Headers and FormData (fetch.js; require('node-fetch') and
// require('form-data') give the same) send requests through the Request's Fetcher; without one
// every fetch rejects. fhirgate's is an HTTPFetcher over the project's egress client (package
// egress: the allow-list, every address checked at connect), which bounds the run's calls and
// records each (host, outcome, status, bytes) for the AuditEvent. A fetch runs on a goroutine of
// its own (eventLoop.spawn) and returns a pending promise, which the run's event loop settles on
// the run's goroutine when the request is done, so Promise.all of several fetches overlaps them.
// Under process isolation the worker sends each fetch to the gateway in a fetch frame and goes
// on; the gateway answers each when it is done.
//
// '@medplum/core' provides every export of the pinned @medplum/core but those coreUnavailable
// lists (they need a WebSocket or Medplum's server). core.js writes the ones bots use most
// (constants, outcomes, references, names, resources, HL7 v2 through package hl7js, a MedplumClient
// class whose constructor explains that bots use their medplum argument); the rest come from the
// package itself, bundled by esbuild into corepkg.js and loaded into a runtime the first time it
// reads one of them. Reading a name the module lacks throws a TypeError naming it, and Compile
// refuses a bot that imports one.
//
// The medplum argument offers readResource, readReference, readHistory, readVersion, search,
// searchOne, searchResources, createResource, createResourceIfNoneExist, updateResource,
// upsertResource, patchResource, deleteResource, validateResource, executeBatch, executeBot, and
// raw get, post, put, patch and delete. Each calls the Request's MedplumClient synchronously,
// bounded by the run's deadline, and returns a promise that is already settled. A non-2xx answer rejects with an OperationOutcomeError carrying the backend's
// OperationOutcome (404 without one: "Not found"). executeBot is a POST of
// Bot/{id}/$execute (or Bot/$execute?identifier=) to the MedplumClient, which decides whether
// and how another bot runs (fhirgate's runs it with the same lookup, limits and audit, within a
// depth bound). Without a MedplumClient every call rejects with "no FHIR backend is configured
// for bots".
//
// # Limits
//
// A run stops at its Timeout (wall clock, including code after an await) or when its context
// ends: goja is interrupted at the next instruction. Native calls cannot be interrupted; a run
// that has not stopped one second after its interrupt is answered as timed out anyway and gives
// its slot back, and while MaxConcurrent such runs are still going new runs get ErrBusy.
// Backtracking regular expressions stop after regexpMatchTimeout a match, and the guarded
// methods throw a RangeError instead of answering a timed-out match as "no match" (regexp.go).
// Call depth is bounded, so runaway recursion is an error result. A failed run's message is cut
// to 64 KiB. goja has no heap limit: in process, a heap watchdog interrupts every running bot
// when the running bots together have grown the live heap by Options.HeapBudget (default 256
// MiB) over the idle process's, or it passes Options.MaxHeapBytes (by default 90% of
// GOMEMLIMIT). That stops a bot that allocates in JavaScript but not one big native allocation,
// which, larger than the machine's memory, is fatal to the process. A Pool (see Isolation)
// bounds each bot's memory for real.
//
// MaxConcurrent bounds simultaneous runs, ProjectMaxConcurrent (default half of it) the runs of
// one Request.Project, and Request.MaxConcurrent each bot's; a run waits at most QueueTimeout
// for a slot and then gets ErrBusy. Queued runs are served in turn project by project, and
// within a project user by user (Request.User), so one project flooding the runner costs another
// at most one turn. A bot-to-bot call marked Request.InheritSlot runs on its caller's slot, which
// waits for it, so a chain of calls never waits behind itself. Slots holds these bounds; several
// executors may share one, and SetLimits changes them while runs go on. Every run's timeout is
// cut to MaxTimeout (default 15m).
//
// # Isolation
//
// A Runner runs bots inside the caller's process. A Pool runs them in worker processes, one bot
// at a time per process, with the same Requests and Results (both are Executors):
//
//	pool, err := botrunner.NewPool(botrunner.PoolOptions{
//		Command: []string{exe, "fhirgate", "bot-worker"}, // ends up in ServeWorker
//	})
//	res, err := pool.Run(ctx, req) // as Runner.Run
//	pool.Close()                   // idle workers exit; busy ones after their run
//
// A worker is the same binary, started with a minimal environment (PATH, HOME=/nonexistent,
// GOMAXPROCS=1, GOMEMLIMIT, TZ if the gateway has it: none of the gateway's variables), no file
// descriptors but its stdin, stdout and stderr (on Linux the gateway marks every other
// descriptor it holds close-on-exec first, inherited ones included), its own process group, and, on Linux, a
// parent-death signal (SIGKILL). It exits when its stdin closes. The two talk over the pipes in
// length-prefixed binary frames (protocol.go): the run, the code only when the worker lacks the
// program of its digest (workers cache compiled programs), the bot's medplum calls (the worker
// asks, the gateway calls the Request's MedplumClient with the run's context and answers), a
// cancellation, the result. Stderr goes to the pool's logger.
//
// Limits: the worker's Go runtime keeps its memory under 3/4 of WorkerMemory (GOMEMLIMIT), and
// its heap watchdog stops a bot whose live heap passes 5/8 of it ("memory limit exceeded", the
// worker stays). The pool reads each busy worker's own resident memory (RssAnon + RssShmem:
// the binary's shared pages do not count) every 20 ms and kills a worker over WorkerMemory. A
// bot stuck in a native call at its deadline is answered as timed out one second later and its
// worker killed; a worker that does not answer at all by the deadline plus two seconds is
// killed. A killed or crashed worker is replaced by the next run, and its run is an OutcomeError
// ("bot worker killed: memory limit exceeded (…)", "bot worker killed: the bot did not stop at
// its deadline", "bot worker crashed (exit status 2)"); other runs, in other workers, go on.
//
// Sharing: runs spread over one worker per CPU; beyond that, a run joins the least loaded worker
// already running (or starting for) its bot, up to PoolOptions.RunsPerWorker. A worker never
// holds runs of two bots at once, so the limits above end runs of one bot only: a run whose
// worker a sibling brought down is told so ("bot worker killed during another run of this bot,
// which shared it: …"). Fewer, busier processes are what make this cheaper, not just smaller: a
// worker with runs queued does not sleep and wake for each one (measured through Caddy: ~64
// instead of ~100 µs of worker CPU per trivial run; 2 instead of 8 processes at 8 concurrent runs).
//
// What the process boundary does not do: a worker runs as the same OS user, with no seccomp
// filter, namespace or chroot. The JavaScript sandbox (no filesystem, network, process or
// environment API) is what keeps a bot from the host; a bot that broke out of the engine could
// read what the gateway's user can read and open connections. What it could not do is read the
// gateway's memory (signing keys, tokens, other runs' data), use its open files or sockets, see
// its environment, or take it down with memory, CPU or a crash.
//
// # Results
//
// undefined → 200 all-ok OperationOutcome (application/fhir+json); a string → text/plain, or
// x-application/hl7-v2+er7 when the request was HL7; an Hl7Message → x-application/hl7-v2+er7 with
// CR between segments; an object with a string resourceType → application/fhir+json; any other
// JSON value → application/json. A throw or rejection, a value JSON cannot express, a result over
// MaxResultBytes, a promise that never settles and a missing handler are OutcomeError; the message
// follows Medplum's normalizeErrorString, and Body holds it as an OperationOutcome. Content types
// carry "; charset=utf-8".
package botrunner
