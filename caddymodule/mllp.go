package caddymodule

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/google/uuid"
	"github.com/mholt/caddy-l4/layer4"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/botapi"
	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/hl7"
	"github.com/fhirgate/fhirgate/internal/mllp"
)

func init() {
	caddy.RegisterModule(MLLP{})
}

// Defaults of the MLLP handler.
const (
	DefaultMLLPMaxMessage      = 1 << 20
	DefaultMLLPIdleTimeout     = 5 * time.Minute
	DefaultMLLPMaxConcurrent   = 32
	DefaultMLLPDuplicateWindow = 10 * time.Minute
	// mllpDuplicatesMax bounds the acknowledgments remembered for
	// duplicates, per handler.
	mllpDuplicatesMax = 100_000
	// mllpDuplicatesMaxBytes bounds the memory they hold, per handler:
	// about 30,000 answers of a typical ACK's size, whatever size a bot's
	// answers have (a full memory of 100,000 ACKs held 38 MB of heap in
	// fhirgate-bench, twice that in RSS).
	mllpDuplicatesMaxBytes = 16 << 20
	// mllpBusyWait is how long a message waits, retrying, when every bot
	// run slot is taken, before it is answered AE (the sender may resend).
	mllpBusyWait = 30 * time.Second
	// mllpBusyPause is the pause before such a retry. A busy answer comes
	// after the run already waited its turn in the runner's queue, so the
	// message rejoins the queue at once rather than after the Retry-After
	// an HTTP client is given (a second in which slots may free up while
	// it holds one of max_concurrent doing nothing); the pause only bounds
	// the retries should the runner refuse without waiting.
	mllpBusyPause = 20 * time.Millisecond
	// mllpKeptBuffer bounds the answer buffer a connection keeps between
	// messages.
	mllpKeptBuffer = 64 << 10
)

// MLLP is a caddy-l4 connection handler that takes HL7 v2 messages framed
// by MLLP (`0x0B` message `0x1C 0x0D`) and runs a bot on each, exactly as
// `$execute` with `x-application/hl7-v2+er7` (the same runtimes, limits,
// fair shares, AuditEvent and metrics), as the bot itself (`event.requester`
// is `Bot/{id}`). It answers every message in order on the connection it
// came on:
//
// - the message the bot returns (an `Hl7Message` or a string holding one),
// - an `AA` built from the message when the bot returns nothing (or data
// that is not HL7),
// - an `AE` with an ERR segment carrying the error when the bot throws,
// times out, or cannot run,
// - an `AR` when the frame is not an HL7 message.
//
// A message naming MSH-15 or MSH-16 is in HL7's enhanced mode: a commit
// acknowledgment (`CA`) is sent when it is taken in, if MSH-15 asks, and
// the application acknowledgment only as MSH-16 asks. A message whose
// sender (MSH-3, MSH-4) and control id (MSH-10) were seen within
// `duplicate_window` gets the first copy's answer without running again.
//
// TLS, IP allow-lists, the PROXY protocol and throttling come from
// caddy-l4's own handlers and matchers placed before it in the route.
//
//	layer4 {
//		:2575 {
//			route {
//				fhirgate_mllp {
//					project <id>
//					bot <system|value | Bot/id>
//					route {
//						sending_application <MSH-3>
//						sending_facility <MSH-4>
//						receiving_application <MSH-5>
//						receiving_facility <MSH-6>
//						bot <system|value | Bot/id>
//					}
//					max_message <size>
//					idle_timeout <duration>
//					max_concurrent <n>
//					duplicate_window <duration | off>
//				}
//			}
//		}
//	}
type MLLP struct {
	// Project is the id of the project whose bots run. Required.
	Project string `json:"project,omitempty"`

	// Bot names the bot run for a message no route matches: its identifier
	// `system|value` (or a bare value, as `$execute?identifier=`), or
	// `Bot/{id}`. Without it, a message no route matches is answered AE.
	Bot string `json:"bot,omitempty"`

	// Routes send messages to other bots by their header: the first route
	// whose given fields all equal the message's (the first component,
	// HD's namespace id) wins.
	Routes []MLLPRoute `json:"routes,omitempty"`

	// MaxMessage bounds a message, in bytes. A larger frame closes the
	// connection with a log line: the sender cannot be answered in step
	// once part of its frame is thrown away. Default: 1 MiB.
	MaxMessage int64 `json:"max_message,omitempty"`

	// IdleTimeout closes a connection on which no complete message arrived
	// for this long since the last answer (so a sender trickling one frame
	// is bounded too). Default: 5m.
	IdleTimeout caddy.Duration `json:"idle_timeout,omitempty"`

	// MaxConcurrent bounds the messages this handler processes at once,
	// over all its connections. Beyond it a connection's next message
	// waits unread, which holds the sender back through TCP; nothing is
	// dropped. Default: 32.
	MaxConcurrent int `json:"max_concurrent,omitempty"`

	// DuplicateWindow is how long a message's answer is remembered for a
	// duplicate (same MSH-3, MSH-4 and MSH-10). A negative value (`off` in
	// the Caddyfile) turns duplicate detection off. Answers are kept in
	// memory, at most 100,000 of them and 16 MiB per handler, the oldest
	// forgotten first (so under a heavy feed a duplicate is recognized
	// for less than the window); a restart or reload forgets them.
	// Default: 10m.
	DuplicateWindow caddy.Duration `json:"duplicate_window,omitempty"`

	app    *App
	bots   *botAPI
	logger *zap.Logger
	ctx    context.Context
	slots  chan struct{}
	dups   *mllp.Duplicates
}

// MLLPRoute sends the messages whose header matches to a bot. An empty
// field matches any value.
type MLLPRoute struct {
	// SendingApplication is MSH-3.
	SendingApplication string `json:"sending_application,omitempty"`
	// SendingFacility is MSH-4.
	SendingFacility string `json:"sending_facility,omitempty"`
	// ReceivingApplication is MSH-5.
	ReceivingApplication string `json:"receiving_application,omitempty"`
	// ReceivingFacility is MSH-6.
	ReceivingFacility string `json:"receiving_facility,omitempty"`
	// Bot names the bot, as MLLP's bot field. Required.
	Bot string `json:"bot,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (MLLP) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "layer4.handlers.fhirgate_mllp",
		New: func() caddy.Module { return new(MLLP) },
	}
}

// Provision sets the handler up over the fhirgate app's store and bot
// runners.
func (h *MLLP) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	h.ctx = ctx
	if h.MaxMessage == 0 {
		h.MaxMessage = DefaultMLLPMaxMessage
	}
	if h.IdleTimeout == 0 {
		h.IdleTimeout = caddy.Duration(DefaultMLLPIdleTimeout)
	}
	if h.MaxConcurrent == 0 {
		h.MaxConcurrent = DefaultMLLPMaxConcurrent
	}
	if h.DuplicateWindow == 0 {
		h.DuplicateWindow = caddy.Duration(DefaultMLLPDuplicateWindow)
	}
	if err := h.Validate(); err != nil {
		return err
	}
	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	appVal, err := ctx.App("fhirgate")
	if err != nil {
		return fmt.Errorf("loading fhirgate app: %w", err)
	}
	h.app = appVal.(*App)
	// MLLP runs have no request: their bots reach the backend through the
	// config's request-less route (App.backendFor); their async jobs, none.
	h.bots, err = newBotAPI(h.app, h.logger, h.MaxMessage, "mllp", h.app.backendFor)
	if err != nil {
		return err
	}
	h.slots = make(chan struct{}, h.MaxConcurrent)
	if h.DuplicateWindow > 0 {
		h.dups = mllp.NewDuplicates(time.Duration(h.DuplicateWindow), mllpDuplicatesMax, mllpDuplicatesMaxBytes, nil)
	}
	return nil
}

// Validate checks the configuration.
func (h *MLLP) Validate() error {
	if h.Project == "" {
		return errors.New("project is required")
	}
	if h.Bot == "" && len(h.Routes) == 0 {
		return errors.New("bot is required (or routes)")
	}
	for i, r := range h.Routes {
		if r.Bot == "" {
			return fmt.Errorf("route %d: bot is required", i+1)
		}
	}
	if h.MaxMessage < 0 || h.MaxMessage > 64<<20 {
		return fmt.Errorf("max_message %d: must be between 1 byte and 64 MiB", h.MaxMessage)
	}
	if h.IdleTimeout < 0 {
		return errors.New("idle_timeout must be positive")
	}
	if h.MaxConcurrent < 0 {
		return errors.New("max_concurrent must be positive")
	}
	return nil
}

// Cleanup lets this config's runs end as the HTTP handler's do.
func (h *MLLP) Cleanup() error {
	h.bots.cleanup(caddy.Exiting())
	return nil
}

// Handle serves one connection: frame after frame, each answered before the
// next is read, until the peer closes it, it idles past idle_timeout, a
// frame breaks the size bound, or the config is unloaded.
func (h *MLLP) Handle(cx *layer4.Connection, _ layer4.Handler) error {
	if err := h.app.awaitDeclared(h.ctx); err != nil {
		h.logger.Warn("mllp connection refused: configuration not loaded", zap.Error(err))
		return nil
	}
	mllpConnections.Inc()
	defer mllpConnections.Dec()
	remote := zap.String("remote", cx.RemoteAddr().String())
	// An unloaded config (reload, exit) ends the wait for the next frame;
	// a message being processed is answered first.
	stop := context.AfterFunc(h.ctx, func() { _ = cx.SetReadDeadline(time.Now()) })
	defer stop()

	r := mllp.NewReader(cx, int(h.MaxMessage))
	var out []byte // the connection's answers are framed here, one at a time
	idle := time.Duration(h.IdleTimeout)
	for {
		_ = cx.SetReadDeadline(time.Now().Add(idle))
		msg, skipped, err := r.Next()
		if skipped > 0 {
			mllpFrameErrors.WithLabelValues("skipped_bytes").Inc()
			h.logger.Warn("mllp bytes outside a frame skipped", remote, zap.Int("bytes", skipped))
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
			return nil
		case h.ctx.Err() != nil:
			return nil // config unloaded between messages
		case errors.Is(err, os.ErrDeadlineExceeded):
			mllpFrameErrors.WithLabelValues("idle").Inc()
			h.logger.Info("mllp connection closed: idle", remote, zap.Duration("idle_timeout", idle))
			return nil
		case errors.Is(err, mllp.ErrFrameTooLarge):
			mllpFrameErrors.WithLabelValues("too_large").Inc()
			h.logger.Warn("mllp connection closed: frame too large", remote, zap.Int64("max_message", h.MaxMessage))
			return nil
		case errors.Is(err, mllp.ErrTruncated):
			mllpFrameErrors.WithLabelValues("truncated").Inc()
			h.logger.Warn("mllp connection closed inside a frame", remote)
			return nil
		default:
			h.logger.Info("mllp connection ended", remote, zap.Error(err))
			return nil
		}
		if err := h.answer(cx, msg, &out); err != nil {
			h.logger.Info("mllp connection ended while answering", remote, zap.Error(err))
			return nil
		}
	}
}

// answer processes one message and writes its acknowledgments, each
// framed in *out (the connection's buffer, reused) and sent in one write.
func (h *MLLP) answer(cx *layer4.Connection, raw []byte, out *[]byte) error {
	write := func(ack []byte) error {
		if ack == nil {
			return nil
		}
		_ = cx.SetWriteDeadline(time.Now().Add(time.Duration(h.IdleTimeout)))
		*out = mllp.AppendFrame((*out)[:0], ack)
		_, err := cx.Write(*out)
		if cap(*out) > mllpKeptBuffer {
			*out = nil // a rare large answer does not stay with the connection
		}
		return err
	}
	msg, err := hl7.ParseBytes(raw)
	if err != nil {
		mllpMessages.WithLabelValues("AR").Inc()
		return write(mllp.Reject(time.Now(), "not an HL7 v2 message: "+err.Error()))
	}
	modes := mllp.ModesOf(msg)
	if modes.Enhanced && modes.Accept.Wants(hl7.CA) {
		ca, err := mllp.Ack(msg, hl7.CA, "", "")
		if err != nil {
			return write(h.reject(err))
		}
		if err := write(ca); err != nil {
			return err
		}
	}
	process := func() ([]byte, bool) {
		code, ack, keep := h.run(msg, raw)
		label := string(code)
		if code.Text() == "" {
			label = "other" // a bot's own MSA-1 must not grow the label set
		}
		mllpMessages.WithLabelValues(label).Inc()
		if !modes.Application.Wants(code) {
			return nil, keep
		}
		return ack, keep
	}
	if h.dups == nil {
		ack, _ := process()
		return write(ack)
	}
	msh := msg.Header()
	key := msh.Field(3).String() + "\x00" + msh.Field(4).String() + "\x00" + msh.Field(10).String()
	ack, dup := h.dups.Do(key, process)
	if dup {
		mllpMessages.WithLabelValues("duplicate").Inc()
	}
	return write(ack)
}

// reject is the AR for a message that could not be acknowledged properly.
func (h *MLLP) reject(err error) []byte {
	mllpMessages.WithLabelValues("AR").Inc()
	return mllp.Reject(time.Now(), err.Error())
}

// run runs the bot for msg, holding one of the handler's slots, and
// returns the application acknowledgment, its code, and whether it may be
// remembered for duplicates (not when the bot could not run for now).
func (h *MLLP) run(msg *hl7.Message, raw []byte) (code hl7.AckCode, ack []byte, keep bool) {
	select {
	case h.slots <- struct{}{}:
	case <-h.ctx.Done():
		return h.errorAck(msg, "the gateway is shutting down; send the message again", false)
	}
	defer func() { <-h.slots }()

	bot := h.botFor(msg)
	if bot == "" {
		return h.errorAck(msg, "no bot is configured for this message's sender or receiver", false)
	}
	m := botapi.Message{Project: h.Project, Bot: bot, ContentType: botrunner.MediaHL7, Body: raw, Header: mllpHeader, TraceID: uuid.NewString()}
	deadline := time.Now().Add(mllpBusyWait)
	for {
		res, err := h.bots.RunMessage(context.Background(), m)
		if ferr := fhir.AsError(err); ferr != nil {
			if ferr.RetryAfter > 0 && time.Now().Add(mllpBusyPause).Before(deadline) && h.ctx.Err() == nil {
				time.Sleep(mllpBusyPause)
				continue
			}
			return h.errorAck(msg, ferr.Message, false)
		}
		if err != nil {
			return h.errorAck(msg, err.Error(), false)
		}
		return h.resultAck(msg, res)
	}
}

// resultAck maps a run's result onto the acknowledgment.
func (h *MLLP) resultAck(msg *hl7.Message, res *botrunner.Result) (hl7.AckCode, []byte, bool) {
	if res.Outcome != botrunner.OutcomeSuccess {
		return h.errorAck(msg, res.Message, true)
	}
	if strings.HasPrefix(res.ContentType, botrunner.MediaHL7) {
		answer, err := hl7.ParseBytes(res.Body)
		if err != nil {
			return h.errorAck(msg, "the bot's answer is not an HL7 message: "+err.Error(), true)
		}
		code := hl7.AA
		if msa, ok := answer.Segment("MSA"); ok {
			code = hl7.AckCode(strings.ToUpper(msa.Field(1).String()))
		}
		// A copy: res.Body may share its array with the rest of the
		// worker's answer (the console output), which the duplicate
		// memory must not keep alive.
		return code, bytes.Clone(res.Body), true
	}
	ack, err := mllp.Ack(msg, hl7.AA, "", "")
	if err != nil {
		return hl7.AR, h.reject(err), true
	}
	return hl7.AA, ack, true
}

// errorAck is the AE carrying why the message was not processed.
func (h *MLLP) errorAck(msg *hl7.Message, why string, keep bool) (hl7.AckCode, []byte, bool) {
	ack, err := mllp.Ack(msg, hl7.AE, mllp.ErrApplicationInternal, why)
	if err != nil {
		return hl7.AR, h.reject(err), keep
	}
	return hl7.AE, ack, keep
}

// mllpHeader is what event.headers shows an MLLP run: its content type.
// One map for every message (botapi only reads it), so a message costs no
// header of its own.
var mllpHeader = http.Header{"Content-Type": {botrunner.MediaHL7}}

// botFor is the bot of the first route msg matches, else Bot.
func (h *MLLP) botFor(msg *hl7.Message) string {
	msh := msg.Header()
	first := func(i int) string { return msh.Field(i).Component(1, 0, 0) }
	for _, r := range h.Routes {
		if matches(r.SendingApplication, first(3)) && matches(r.SendingFacility, first(4)) &&
			matches(r.ReceivingApplication, first(5)) && matches(r.ReceivingFacility, first(6)) {
			return r.Bot
		}
	}
	return h.Bot
}

func matches(want, got string) bool { return want == "" || want == got }

// Interface guards
var (
	_ caddy.Provisioner  = (*MLLP)(nil)
	_ caddy.Validator    = (*MLLP)(nil)
	_ caddy.CleanerUpper = (*MLLP)(nil)
	_ layer4.NextHandler = (*MLLP)(nil)
)
