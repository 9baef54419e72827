package botrunner

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
)

// A compile process speaks its own short dialect over the frames of protocol.go: the parent sends
// one request frame and closes stdin, the child answers one frame and exits. It shares nothing
// with the bot workers' run frames.
//
//	P→C compile  filename, source: esbuild's transform, then goja's compile (Compile)
//	P→C check    filename, compiled JavaScript: goja's compile only (compileGoja)
//	C→P compiled ok, then the JavaScript and warnings (compile) or nothing (check);
//	             or not ok, then the CompileError's file, line, column and message
const (
	frameCompile  byte = 'C'
	frameCheck    byte = 'G'
	frameCompiled byte = 'F'
)

// compileRole is workerEnv's value in a compile process; bot workers get "1".
const compileRole = "compile"

// compileAnswer is a compile process's answer.
type compileAnswer struct {
	ok       bool
	js       string
	warnings []string
	err      CompileError
}

func (m *compileAnswer) encode(e *encoder) {
	e.bool(m.ok)
	if m.ok {
		e.str(m.js)
		e.uint(uint64(len(m.warnings)))
		for _, w := range m.warnings {
			e.str(w)
		}
		return
	}
	e.str(m.err.File)
	e.uint(uint64(max(m.err.Line, 0)))
	e.uint(uint64(max(m.err.Column, 0)))
	e.str(m.err.Message)
}

func (m *compileAnswer) decode(d *decoder) error {
	m.ok = d.bool()
	if m.ok {
		m.js = d.str()
		n := d.uint()
		if n > uint64(len(d.b)) { // each warning takes a byte at least
			return errors.New("bad warning count")
		}
		for range n {
			m.warnings = append(m.warnings, d.str())
		}
		return d.done()
	}
	m.err.File = d.str()
	m.err.Line = int(d.uint())
	m.err.Column = int(d.uint())
	m.err.Message = d.str()
	return d.done()
}

// serveCompile is the whole life of a compile process: one request, one answer. Its goroutine
// stacks are bounded as a bot worker's are (workerMaxStack), so source nested deeply enough to
// exhaust the parsers' recursion crashes this process quickly, and code that compiles here
// also compiles in a bot worker.
func serveCompile(in io.Reader, out io.Writer) error {
	debug.SetMaxStack(workerMaxStack)
	typ, payload, err := newFrameReader(in, maxParentFrame).next()
	if err != nil {
		return fmt.Errorf("reading the compile frame: %w", err)
	}
	d := &decoder{b: payload}
	filename, source := d.str(), d.str()
	if err := d.done(); err != nil {
		return fmt.Errorf("decoding the compile frame: %w", err)
	}
	var ans compileAnswer
	switch typ {
	case frameCompile:
		var p *Program
		if p, err = Compile(filename, source); err == nil {
			ans.js, ans.warnings = p.JS, p.Warnings
		}
	case frameCheck:
		_, _, err = compileGoja(filename, source)
	default:
		return fmt.Errorf("unknown compile frame type %q", typ)
	}
	ans.ok = err == nil
	if err != nil {
		var ce *CompileError
		if !errors.As(err, &ce) {
			ce = &CompileError{File: filename, Message: err.Error()}
		}
		ans.err = *ce
	}
	return (&frameWriter{w: out}).send(frameCompiled, ans.encode)
}
