package botrunner

import (
	"math"
	"net/http"
	"time"
)

// The frames' payloads (see protocol.go for the exchange).

// initMsg configures a worker.
type initMsg struct {
	version         string
	memory          int64 // the worker's memory cap in bytes
	maxConsoleBytes int
	maxResultBytes  int
	maxFrame        int // the largest frame the pool accepts from the worker
}

func (m *initMsg) encode(e *encoder) {
	e.str(m.version)
	e.int(m.memory)
	e.uint(uint64(m.maxConsoleBytes))
	e.uint(uint64(m.maxResultBytes))
	e.uint(uint64(m.maxFrame))
}

func (m *initMsg) decode(d *decoder) error {
	m.version = d.str()
	m.memory = d.int()
	m.maxConsoleBytes = int(d.uint())
	m.maxResultBytes = int(d.uint())
	m.maxFrame = int(d.uint())
	return d.done()
}

// runMsg starts a run.
type runMsg struct {
	id         uint64
	timeout    time.Duration
	deadline   time.Duration // time left until the caller's deadline; 0 when it has none
	digest     string        // names the program in the worker's cache; "" = code is inline, not cached
	filename   string
	code       string // set when digest is "" (or the pool always sends code)
	hasCode    bool
	hasMedplum bool
	// runtime is the Request's Runtime; instanceKey and instanceBot name its warm instances
	// (instanceKeys), empty for a run that gets a fresh runtime.
	runtime, instanceKey, instanceBot string
	event                             Event
	fhirBaseURL                       string
}

func (m *runMsg) encode(e *encoder) {
	e.uint(m.id)
	e.int(int64(m.timeout))
	e.int(int64(m.deadline))
	e.str(m.digest)
	e.str(m.filename)
	e.bool(m.hasCode)
	if m.hasCode {
		e.str(m.code)
	}
	e.bool(m.hasMedplum)
	e.str(m.runtime)
	e.str(m.instanceKey)
	e.str(m.instanceBot)
	encodeEvent(e, &m.event)
	e.str(m.fhirBaseURL)
}

func (m *runMsg) decode(d *decoder) error {
	m.id = d.uint()
	m.timeout = time.Duration(d.int())
	m.deadline = time.Duration(d.int())
	m.digest = d.str()
	m.filename = d.str()
	if m.hasCode = d.bool(); m.hasCode {
		m.code = d.str()
	}
	m.hasMedplum = d.bool()
	m.runtime = d.str()
	m.instanceKey = d.str()
	m.instanceBot = d.str()
	if err := decodeEvent(d, &m.event); err != nil {
		return err
	}
	m.fhirBaseURL = d.str()
	return d.done()
}

// Secret value kinds on the wire.
const (
	secretNone byte = iota
	secretString
	secretBoolean
	secretInteger
	secretDecimal
)

func encodeEvent(e *encoder, ev *Event) {
	e.str(ev.Bot.Reference)
	e.str(ev.Bot.Display)
	e.str(ev.ContentType)
	in := &ev.Input
	e.uint(uint64(in.Kind))
	switch {
	case in.deferred:
		e.bool(true)
		e.bytes(in.body)
	case in.HL7 != nil:
		// The text Parse was given (framing already stripped) parses to the same message; the
		// worker parses it, which is where a message that was not parsed yet is parsed too.
		e.bool(true)
		e.str(in.HL7.Raw())
	default:
		e.bool(false)
		e.bytes(in.JSON)
		e.str(in.ResourceType)
		e.str(in.Text)
		e.stringMap(in.Form)
	}
	e.uint(uint64(len(ev.Secrets)))
	for k, s := range ev.Secrets {
		e.str(k)
		e.str(s.Name)
		switch {
		case s.ValueString != nil:
			e.b = append(e.b, secretString)
			e.str(*s.ValueString)
		case s.ValueBoolean != nil:
			e.b = append(e.b, secretBoolean)
			e.bool(*s.ValueBoolean)
		case s.ValueInteger != nil:
			e.b = append(e.b, secretInteger)
			e.int(*s.ValueInteger)
		case s.ValueDecimal != nil:
			e.b = append(e.b, secretDecimal)
			e.uint(math.Float64bits(*s.ValueDecimal))
		default:
			e.b = append(e.b, secretNone)
		}
	}
	e.str(ev.TraceID)
	e.bool(ev.Requester != nil)
	if ev.Requester != nil {
		e.str(ev.Requester.Reference)
		e.str(ev.Requester.Display)
	}
	e.stringMap(ev.Headers)
}

func decodeEvent(d *decoder, ev *Event) error {
	ev.Bot.Reference = d.str()
	ev.Bot.Display = d.str()
	ev.ContentType = d.str()
	in := &ev.Input
	in.Kind = InputKind(d.uint())
	if d.bool() {
		// Parsed by the worker's runner once the run holds its slot there.
		in.deferred, in.body = true, d.bytes()
	} else {
		if b := d.bytes(); len(b) > 0 {
			in.JSON = b
		}
		in.ResourceType = d.str()
		in.Text = d.str()
		in.Form = d.stringMap(in.Kind == InputForm)
	}
	n := d.uint()
	if n > uint64(len(d.b)) {
		d.fail()
		return d.err
	}
	if n > 0 {
		ev.Secrets = make(map[string]Secret, n)
	}
	for range n {
		k := d.str()
		s := Secret{Name: d.str()}
		kind := d.byte()
		switch kind {
		case secretString:
			v := d.str()
			s.ValueString = &v
		case secretBoolean:
			v := d.bool()
			s.ValueBoolean = &v
		case secretInteger:
			v := d.int()
			s.ValueInteger = &v
		case secretDecimal:
			v := math.Float64frombits(d.uint())
			s.ValueDecimal = &v
		}
		ev.Secrets[k] = s
	}
	ev.TraceID = d.str()
	if d.bool() {
		ev.Requester = &Reference{Reference: d.str(), Display: d.str()}
	}
	ev.Headers = d.stringMap(false)
	return d.err
}

// resultMsg ends a run.
type resultMsg struct {
	id        uint64
	noResult  bool // the run never started: its deadline had passed on arrival
	abandoned bool // the run did not stop when interrupted; the worker must be replaced
	res       Result
	inputErr  *InputError // the run never started: its input did not parse
}

func (m *resultMsg) encode(e *encoder) {
	e.uint(m.id)
	e.bool(m.noResult)
	e.bool(m.abandoned)
	r := &m.res
	e.uint(uint64(r.Outcome))
	e.bytes(r.Body)
	e.str(r.ContentType)
	e.str(r.Message)
	e.str(r.Console)
	e.bool(r.ConsoleTruncated)
	e.int(int64(r.Duration))
	e.bool(m.inputErr != nil)
	if m.inputErr != nil {
		e.uint(uint64(m.inputErr.Status))
		e.str(m.inputErr.Message)
		e.str(m.inputErr.Expression)
	}
}

func (m *resultMsg) decode(d *decoder) error {
	m.id = d.uint()
	m.noResult = d.bool()
	m.abandoned = d.bool()
	r := &m.res
	r.Outcome = Outcome(d.uint())
	r.Body = d.bytes()
	r.ContentType = d.str()
	r.Message = d.str()
	r.Console = d.str()
	r.ConsoleTruncated = d.bool()
	r.Duration = time.Duration(d.int())
	if d.bool() {
		m.inputErr = &InputError{Status: int(d.uint()), Message: d.str(), Expression: d.str()}
	}
	return d.done()
}

// doMsg is a medplum call from the bot.
type doMsg struct {
	id, call    uint64
	method      string
	path        string
	query       string // url.Values.Encode(); "" for none
	body        []byte
	hasBody     bool // nil and empty bodies differ: GET has none
	contentType string
	header      http.Header
}

func (m *doMsg) encode(e *encoder) {
	e.uint(m.id)
	e.uint(m.call)
	e.str(m.method)
	e.str(m.path)
	e.str(m.query)
	e.bool(m.hasBody)
	e.bytes(m.body)
	e.str(m.contentType)
	e.header(m.header)
}

func (m *doMsg) decode(d *decoder) error {
	m.id = d.uint()
	m.call = d.uint()
	m.method = d.str()
	m.path = d.str()
	m.query = d.str()
	m.hasBody = d.bool()
	m.body = d.bytes()
	if !m.hasBody {
		m.body = nil
	}
	m.contentType = d.str()
	m.header = d.header()
	return d.done()
}

// answerMsg is the gateway's answer to a medplum call.
type answerMsg struct {
	id, call    uint64
	status      int
	contentType string
	body        []byte
	err         string // the backend could not be asked; "" on any HTTP answer
}

func (m *answerMsg) encode(e *encoder) {
	e.uint(m.id)
	e.uint(m.call)
	e.int(int64(m.status))
	e.str(m.contentType)
	e.bytes(m.body)
	e.str(m.err)
}

func (m *answerMsg) decode(d *decoder) error {
	m.id = d.uint()
	m.call = d.uint()
	m.status = int(d.int())
	m.contentType = d.str()
	m.body = d.bytes()
	m.err = d.str()
	return d.done()
}
