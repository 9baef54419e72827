package botrunner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/fhir"
)

// Bounds on what a worker may print to stderr before the pool stops logging it: a Go crash
// prints a goroutine dump, which is worth a few lines of log and no more.
const (
	maxStderrLines    = 100
	maxStderrLineSize = 1 << 10
)

// worker is the pool's handle on one worker process.
type worker struct {
	p         *Pool
	cmd       *exec.Cmd
	pid       int
	stdin     *os.File // closing it asks the worker to exit
	out       frameWriter
	stdout    *os.File
	frames    *frameReader  // of stdout; read by whoever holds reading
	lead      chan struct{} // wakes a run waiting for its result to take over reading (see leadFor)
	dead      chan struct{} // closed once the process has exited and been reaped
	idleSince time.Time     // guarded by p.mu
	bot       string        // the bot its runs are of while busy; guarded by p.mu
	runs      int           // runs taken and not yet put back; guarded by p.mu

	// reading is held by the goroutine reading the worker's frames: a run waiting for its result
	// (see leadFor), or spawn and reap. readErr, guarded by reading, ends all reading.
	reading sync.Mutex
	readErr error

	mu         sync.Mutex
	active     map[uint64]*poolRun // runs sent and not yet answered, by id
	killReason string              // why the pool killed it, "" if it did not
	killedFor  uint64              // the run whose doing the kill was, 0 if none in particular
	killed     bool
	stopping   bool
	exit       string // how the process ended, once dead is closed
}

// poolRun is the pool's side of one run.
type poolRun struct {
	id       uint64
	ctx      context.Context
	req      *Request
	code     string
	deadline time.Time
	done     chan *resultMsg

	cancelOnce sync.Once // the cancel frame goes once, from whichever sees the cancel first
}

// cancelIn tells the worker, once, that the caller cancelled run r. It blocks while the worker
// does not read: call it off the read loop.
func (r *poolRun) cancelIn(w *worker) {
	r.cancelOnce.Do(func() { _ = w.out.send(frameCancel, func(e *encoder) { e.uint(r.id) }) })
}

// cancelFirst sends the cancel frame of r before an answer to r's calls when the caller has
// cancelled r: the call's answer is then the cancel's own doing (its error, typically), and the
// worker, reading frames in order, must see its run cancelled before the bot sees that answer.
// Otherwise the bot could finish on the answer first, as a run that ended cleanly, and its
// worker would keep the warm instance of a run the caller interrupted.
func (r *poolRun) cancelFirst(w *worker) {
	if errors.Is(r.ctx.Err(), context.Canceled) {
		r.cancelIn(w)
	}
}

// maxFrame bounds the frames the pool accepts from a worker: a result body, console output and
// room for an error's OperationOutcome. A worker that sends more is broken and is killed.
func (p *Pool) maxFrame() int {
	return max(p.o.MaxResultBytes, 16<<20) + p.o.MaxConsoleBytes + 1<<20
}

// workerEnvironment is all a worker gets of an environment: none of the gateway's variables
// (which may hold secrets), only what the Go runtime and date handling need. role is the
// process's workerEnv value: "1" for a bot worker, compileRole for a compile process.
func workerEnvironment(memory int64, role string) []string {
	env := []string{
		"PATH=/usr/bin:/bin",
		"HOME=/nonexistent",
		"GOMAXPROCS=1", // a worker runs one bot, and goja is single-threaded
		"GOMEMLIMIT=" + strconv.FormatInt(memory/workerGoLimitDen*workerGoLimitNum, 10),
		workerEnv + "=" + role,
	}
	if tz, ok := os.LookupEnv("TZ"); ok { // bots see the same local time as in-process ones
		env = append(env, "TZ="+tz)
	}
	return env
}

// spawn starts a worker and waits for its hello.
func (p *Pool) spawn(ctx context.Context) (*worker, error) {
	c, err := startChild(p.o.Command, p.o.WorkerMemory, "1")
	if err != nil {
		return nil, err
	}
	cmd, inW, outR, errR := c.cmd, c.stdin, c.stdout, c.stderr
	p.spawns.Add(1)
	w := &worker{p: p, cmd: cmd, pid: cmd.Process.Pid, stdin: inW, out: frameWriter{w: pipeWriter(inW)}, dead: make(chan struct{}), lead: make(chan struct{}, 1), active: map[uint64]*poolRun{}}
	go w.logStderr(errR)

	init := initMsg{
		version:         protocolVersion,
		memory:          p.o.WorkerMemory,
		maxConsoleBytes: p.o.MaxConsoleBytes,
		maxResultBytes:  p.o.MaxResultBytes,
		maxFrame:        p.maxFrame(),
	}
	w.stdout, w.frames = outR, newFrameReader(pipeReader(outR), p.maxFrame())
	go w.reap()
	hello := make(chan error, 1)
	go func() {
		w.reading.Lock()
		err := w.readHello()
		w.reading.Unlock() // before spawn returns: its first run must find no one reading
		hello <- err
	}()
	if err := w.out.send(frameInit, init.encode); err != nil {
		w.kill("")
	}
	timer := time.NewTimer(spawnTimeout)
	defer timer.Stop()
	select {
	case err = <-hello:
	case <-timer.C:
		err = fmt.Errorf("no answer in %v", spawnTimeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		w.kill("")
		<-w.dead
		return nil, fmt.Errorf("starting bot worker %d: %w (%s)", w.pid, err, w.exit)
	}
	p.logger.Debug("bot worker started", zap.Int("pid", w.pid))
	return w, nil
}

// serveDo makes a bot's medplum call with the gateway's client and answers the worker.
func (w *worker) serveDo(r *poolRun, m *doMsg) {
	a := answerMsg{id: m.id, call: m.call}
	defer func() {
		if p := recover(); p != nil {
			w.p.logger.Error("bot FHIR call panicked", zap.Int("pid", w.pid), zap.Any("panic", p))
			a = answerMsg{id: m.id, call: m.call, err: "internal error in the gateway's FHIR client"}
		}
		r.cancelFirst(w)
		_ = w.out.send(frameAnswer, a.encode)
	}()
	if err := checkWorkerCall(m); err != nil {
		a.err = err.Error()
		return
	}
	var query url.Values
	if m.query != "" {
		q, err := url.ParseQuery(m.query)
		if err != nil {
			a.err = "invalid search query: " + err.Error()
			return
		}
		query = q
	}
	if r.req.Medplum == nil {
		a.err = "no FHIR backend is configured for bots"
		return
	}
	ctx, cancel := context.WithDeadline(r.ctx, r.deadline)
	defer cancel()
	status, ct, body, err := r.req.Medplum.Do(ctx, m.method, m.path, query, m.body, m.contentType, m.header)
	switch {
	case err != nil:
		// A *url.Error repeats the backend URL, query (and so search parameters) included.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		a.err = err.Error()
	case len(body) > maxParentFrame-frameOverhead:
		a.err = fmt.Sprintf("the backend's answer of %d bytes is larger than a bot worker may receive", len(body))
	default:
		a.status, a.contentType, a.body = status, ct, body
	}
}

// workerMethods are the methods a bot's medplum calls use.
var workerMethods = map[string]bool{
	http.MethodGet: true, http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true, http.MethodDelete: true,
}

// checkWorkerCall holds a worker's call to what the bot's client can ask for in process: a
// worker runs untrusted code, and should the engine ever be broken out of, the gateway's
// backend must not see requests a bot could not make (a path climbing out of the FHIR base,
// say).
func checkWorkerCall(m *doMsg) error {
	if !workerMethods[m.method] {
		return fmt.Errorf("method '%s' is not allowed", truncate(m.method, 20))
	}
	return fhir.CheckBotPath(m.path)
}

// run runs req on the worker. It returns nil when the run never started because its context
// ended first, and an *InputError when its input (parsed by the worker) did not parse.
func (w *worker) run(ctx context.Context, req *Request) (*Result, error) {
	p := w.p
	start := time.Now()
	timeout := req.Timeout // set by Pool.Run
	filename, code := req.Filename, req.Code
	if filename == "" {
		filename = "index.js"
	}
	if req.Program != nil {
		code = req.Program.JS
	}
	r := &poolRun{id: p.nextID.Add(1), ctx: ctx, req: req, code: code, deadline: start.Add(timeout), done: make(chan *resultMsg, 1)}
	m := runMsg{id: r.id, timeout: timeout, filename: filename, hasMedplum: req.Medplum != nil, runtime: req.Runtime, event: req.Event, fhirBaseURL: req.FHIRBaseURL}
	if dl, ok := ctx.Deadline(); ok {
		m.deadline = max(time.Until(dl), 1) // 1ns: already passed, the worker's context ends at once
		if dl.Before(r.deadline) {
			r.deadline = dl
		}
	}
	if req.CacheKey != "" {
		m.digest = p.codes.digest(req.CacheKey, filename, code)
		// The worker's instances of a version are of its code: the key names it by digest.
		m.instanceKey, m.instanceBot = instanceKeys(req)
		m.instanceKey += "\x00" + m.digest
	}
	if m.digest == "" || p.alwaysSendCode {
		m.hasCode, m.code = true, code
		p.codeSends.Add(1)
	}

	w.mu.Lock()
	w.active[r.id] = r
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.active, r.id)
		w.mu.Unlock()
	}()
	// The kill is a timer, not a select case, so that it also ends a write the worker never reads.
	killer := time.AfterFunc(time.Until(r.deadline.Add(killGrace)), func() { w.killFor(r.id, "the bot did not stop at its deadline") })
	defer killer.Stop()
	// A deadline the worker knows itself; a cancel it is told of. The run's goroutine may be
	// reading frames when it comes, so the frame goes from the context's own goroutine.
	if ctx.Done() != nil {
		stopCancel := context.AfterFunc(ctx, func() {
			if errors.Is(ctx.Err(), context.Canceled) {
				r.cancelIn(w)
			}
		})
		defer stopCancel()
	}
	if err := w.out.send(frameRun, m.encode); err != nil {
		w.kill("")
	}
	for {
		if w.reading.TryLock() {
			w.leadFor(r)
		}
		select {
		case msg := <-r.done:
			return w.result(r.id, msg)
		case <-w.dead:
			select {
			case msg := <-r.done:
				return w.result(r.id, msg)
			default:
			}
			return w.failure(r.id, req, start), nil
		case <-w.lead:
		}
	}
}

// result turns a worker's answer to run id into the run's Result, or its input error.
func (w *worker) result(id uint64, m *resultMsg) (*Result, error) {
	if m.abandoned {
		// The bot is stuck in a native call the worker could not interrupt: the run is answered
		// (as timed out), and the worker, which still burns a CPU on it, goes.
		w.killFor(id, "the bot was stuck in a native call past its deadline")
	}
	if m.inputErr != nil {
		return nil, m.inputErr
	}
	if m.noResult {
		return nil, nil
	}
	res := m.res
	return &res, nil
}

// failure is the Result of run id, whose worker died under it.
func (w *worker) failure(id uint64, req *Request, start time.Time) *Result {
	w.mu.Lock()
	reason, culprit, exit := w.killReason, w.killedFor, w.exit
	w.mu.Unlock()
	msg := "bot worker crashed (" + exit + ")"
	switch {
	case reason != "" && culprit != 0 && culprit != id:
		msg = "bot worker killed during another run of this bot, which shared it: " + reason
	case reason != "":
		msg = "bot worker killed: " + reason
	}
	w.p.logger.Warn("bot worker died during a run", zap.Int("pid", w.pid), zap.String("bot", req.BotID), zap.String("reason", msg))
	return finish(&Result{Outcome: OutcomeError, Message: msg, Duration: time.Since(start)})
}

// alive tells whether the worker can take another run.
func (w *worker) alive() bool {
	select {
	case <-w.dead:
		return false
	default:
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.killed && !w.stopping
}

// kill SIGKILLs the worker; the first reason given is the one its runs report.
func (w *worker) kill(reason string) { w.killFor(0, reason) }

// killFor kills the worker because of run id (0: of no run in particular, such as its memory,
// which all its runs share): the runs sharing the worker are told it was another run's doing.
func (w *worker) killFor(id uint64, reason string) {
	w.mu.Lock()
	if w.killReason == "" && !w.stopping {
		w.killReason, w.killedFor = reason, id
	}
	w.killed = true
	w.mu.Unlock()
	_ = w.cmd.Process.Kill()
}

// stop asks the worker to exit by closing its stdin, and kills it if it has not a few seconds
// later.
func (w *worker) stop() {
	w.mu.Lock()
	w.stopping = true
	w.mu.Unlock()
	w.stdin.Close()
	go func() {
		select {
		case <-w.dead:
		case <-time.After(5 * time.Second):
			_ = w.cmd.Process.Kill()
		}
	}()
}

// logStderr logs what the worker prints to stderr, line by line, up to maxStderrLines.
func (w *worker) logStderr(r *os.File) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4<<10), 64<<10)
	lines := 0
	for sc.Scan() {
		if lines++; lines > maxStderrLines {
			if lines == maxStderrLines+1 {
				w.p.logger.Warn("bot worker stderr: further output dropped", zap.Int("pid", w.pid))
			}
			continue
		}
		w.p.logger.Warn("bot worker stderr", zap.Int("pid", w.pid), zap.String("line", truncate(sc.Text(), maxStderrLineSize)))
	}
	_, _ = io.Copy(io.Discard, r) // a line too long for the scanner: drain, so the worker never blocks
}
