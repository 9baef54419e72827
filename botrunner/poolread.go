package botrunner

import (
	"errors"
	"fmt"
	"io"
	"os"

	"go.uber.org/zap"
)

// A worker's frames are read by the runs waiting on it, not by a goroutine of their own: the
// run that finds no one reading reads (it "leads") until its own result comes, handing the
// other runs' frames on as it goes, and then wakes a waiting run to take over. With one run at
// a time, which is how a worker spends most of its life, the result wakes the very goroutine
// that waits for it, from the runtime's poller: a reader goroutine handing the result over
// cost the gateway a second wake-up per run, and the runtime woke another thread to share the
// work that hand-over created (BenchmarkEchoRuntimes/process/awslambda, gateway and worker:
// context switches per run 5.2 → 2.3, futex calls 1.8 → 0.04, CPU per run 128 → 77 µs).
// Between runs nothing reads, as the worker writes nothing then; reap reads what is left once
// the process has ended.

// leadFor reads frames, w.reading held, until run r has its result or reading fails, and
// releases w.reading. Another run waiting for its result is then woken to take over.
func (w *worker) leadFor(r *poolRun) {
	err := w.readErr
	for err == nil && len(r.done) == 0 {
		err = w.readFrame()
	}
	w.reading.Unlock()
	if err != nil {
		return // the process is ending: the runs wait for reap
	}
	w.mu.Lock()
	others := len(w.active) > 1
	w.mu.Unlock()
	if others {
		select {
		case w.lead <- struct{}{}:
		default: // one is being woken already
		}
	}
}

// readFrame reads and handles one frame, w.reading held. A failure ends all reading: a
// protocol error kills the worker, and a closed stdout means it is done, whatever it is doing.
func (w *worker) readFrame() (err error) {
	defer func() {
		if p := recover(); p != nil {
			w.p.logger.Error("bot worker reader panicked", zap.Int("pid", w.pid), zap.Any("panic", p))
			err = fmt.Errorf("reader panicked: %v", p)
		}
		if err != nil {
			w.readErr = err
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) && w.alive() {
				w.kill("it broke the protocol: " + err.Error())
			}
			_ = w.cmd.Process.Kill()
		}
	}()
	typ, payload, err := w.frames.next()
	if err != nil {
		return err
	}
	return w.handle(typ, payload)
}

// readHello reads the first frame, which must be the hello, w.reading held.
func (w *worker) readHello() error {
	typ, payload, err := w.frames.next()
	if err == nil {
		d := &decoder{b: payload}
		version := d.str()
		switch {
		case typ != frameHello:
			err = fmt.Errorf("first frame is %q, not hello", typ)
		case version != protocolVersion:
			err = fmt.Errorf("the worker speaks %q, the gateway %q", version, protocolVersion)
		}
	}
	if err != nil {
		w.readErr = err
	}
	return err
}

// reap waits for the process to end, reads what it wrote before it ended (a result sent just
// before the pool killed its worker still reaches its run), and marks the worker dead.
func (w *worker) reap() {
	err := w.cmd.Wait()
	w.reading.Lock()
	for w.readErr == nil {
		_ = w.readFrame()
	}
	w.stdout.Close()
	w.reading.Unlock()
	w.mu.Lock()
	w.exit = "exited"
	if err != nil {
		w.exit = err.Error() // "exit status 2", "signal: killed"
	}
	w.mu.Unlock()
	w.stdin.Close()
	close(w.dead)
}

func (w *worker) handle(typ byte, payload []byte) error {
	d := &decoder{b: payload}
	switch typ {
	case frameResult:
		m := new(resultMsg)
		if err := m.decode(d); err != nil {
			return fmt.Errorf("decoding a result frame: %w", err)
		}
		if r := w.currentRun(m.id); r != nil {
			select {
			case r.done <- m: // buffered; a run gets one result
			default: // a second result for the run is dropped
			}
		}
	case frameNeed:
		id := d.uint()
		if err := d.done(); err != nil {
			return fmt.Errorf("decoding a need frame: %w", err)
		}
		if r := w.currentRun(id); r != nil {
			w.p.codeSends.Add(1)
			// Not on this goroutine: a large write waits for the worker to read.
			go func() { _ = w.out.send(frameCode, func(e *encoder) { e.uint(id); e.str(r.code) }) }()
		}
	case frameDo:
		m := new(doMsg)
		if err := m.decode(d); err != nil {
			return fmt.Errorf("decoding a do frame: %w", err)
		}
		if r := w.currentRun(m.id); r != nil {
			go w.serveDo(r, m)
		}
	case frameFetch:
		m := new(fetchMsg)
		if err := m.decode(d); err != nil {
			return fmt.Errorf("decoding a fetch frame: %w", err)
		}
		if r := w.currentRun(m.id); r != nil {
			go w.serveFetch(r, m)
		}
	default:
		return fmt.Errorf("unknown frame type %q", typ)
	}
	return nil
}

// currentRun returns the run with id id if it is still waiting for its result.
func (w *worker) currentRun(id uint64) *poolRun {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.active[id]
}
