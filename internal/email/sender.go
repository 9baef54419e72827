package email

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/mail"
	"strconv"
	"strings"
	"sync"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/fhirgate/fhirgate/internal/fhir"
)

// TLS modes of the connection to the SMTP server.
const (
	TLSMandatory     = "mandatory"     // STARTTLS, required (the default)
	TLSOpportunistic = "opportunistic" // STARTTLS when the server offers it
	TLSImplicit      = "implicit"      // TLS from the first byte (SMTPS, usually port 465)
	TLSOff           = "off"           // plain text: only for a relay on a trusted network
)

// Defaults of Config.
const (
	DefaultTimeout    = 15 * time.Second
	DefaultRateLimit  = 100
	DefaultRatePeriod = time.Hour
)

// Config is the SMTP server and the sending rules.
type Config struct {
	Addr     string // host:port of the SMTP server
	Username string // empty: no authentication
	Password string
	From     string // the default sender, used when a bot gives none; any project may use it
	TLS      string // TLSMandatory (""), TLSOpportunistic, TLSImplicit or TLSOff
	Timeout  time.Duration
	// RateLimit messages per RatePeriod per project (counted in this process).
	RateLimit  int
	RatePeriod time.Duration
	// Senders are the other addresses each project's bots may send from, by project id.
	Senders map[string][]string
}

// Sender sends bots' email. It is safe for concurrent use.
type Sender struct {
	cfg  Config
	host string
	port int
	from *mail.Address

	mu   sync.Mutex
	sent map[string][]time.Time // per project: send times within the current period, oldest first
}

// New checks cfg and makes a Sender.
func New(cfg Config) (*Sender, error) {
	host, portStr, err := net.SplitHostPort(cfg.Addr)
	if err != nil || host == "" {
		return nil, fmt.Errorf("email: smtp must be host:port, not %q", cfg.Addr)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port > 65535 {
		return nil, fmt.Errorf("email: smtp port %q is not a port number", portStr)
	}
	s := &Sender{cfg: cfg, host: host, port: port, sent: map[string][]time.Time{}}
	if cfg.From != "" {
		if s.from, err = mail.ParseAddress(cfg.From); err != nil {
			return nil, fmt.Errorf("email: from %q is not an email address: %v", cfg.From, err)
		}
	}
	switch cfg.TLS {
	case "", TLSMandatory, TLSOpportunistic, TLSImplicit, TLSOff:
	default:
		return nil, fmt.Errorf("email: tls must be mandatory, opportunistic, implicit or off, not %q", cfg.TLS)
	}
	if (cfg.Username == "") != (cfg.Password == "") {
		return nil, errors.New("email: username and password go together")
	}
	for project, addrs := range cfg.Senders {
		for _, a := range addrs {
			if _, err := mail.ParseAddress(a); err != nil {
				return nil, fmt.Errorf("email: project %s: sender %q is not an email address: %v", project, a, err)
			}
		}
	}
	if s.cfg.Timeout <= 0 {
		s.cfg.Timeout = DefaultTimeout
	}
	if s.cfg.RateLimit <= 0 {
		s.cfg.RateLimit = DefaultRateLimit
	}
	if s.cfg.RatePeriod <= 0 {
		s.cfg.RatePeriod = DefaultRatePeriod
	}
	return s, nil
}

// Send parses Medplum's email options and sends the message for project.
func (s *Sender) Send(ctx context.Context, project string, body []byte) error {
	m, err := ParseMessage(body)
	if err != nil {
		return fhir.NewError(http.StatusBadRequest, err.Error())
	}
	if m.From == nil {
		if s.from == nil {
			return fhir.NewError(http.StatusBadRequest, "the email has no sender (from), and no default sender is configured")
		}
		m.From = s.from
	}
	if !s.mayUse(project, m.From.Address) {
		// 400, not 403: the bot's medplum client turns a 403 into Medplum's bare "Forbidden".
		return fhir.NewError(http.StatusBadRequest, fmt.Sprintf("this project may not send email from %s (email_senders)", m.From.Address))
	}
	if !s.take(project, time.Now()) {
		return &fhir.Error{Status: http.StatusTooManyRequests, Message: fmt.Sprintf(
			"this project has sent its %d emails for this period of %s", s.cfg.RateLimit, s.cfg.RatePeriod), RetryAfter: s.cfg.RatePeriod}
	}
	msg, err := s.build(m)
	if err != nil {
		return fhir.NewError(http.StatusBadRequest, err.Error())
	}
	client, err := gomail.NewClient(s.host, s.options()...)
	if err != nil {
		return fhir.NewError(http.StatusBadGateway, "email: "+err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if err := client.DialAndSendWithContext(ctx, msg); err != nil {
		return fhir.NewError(http.StatusBadGateway, "the SMTP server did not take the email: "+s.scrub(err.Error()))
	}
	return nil
}

func (s *Sender) options() []gomail.Option {
	opts := []gomail.Option{gomail.WithPort(s.port), gomail.WithTimeout(s.cfg.Timeout)}
	switch s.cfg.TLS {
	case TLSOpportunistic:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSOpportunistic))
	case TLSImplicit:
		opts = append(opts, gomail.WithSSL())
	case TLSOff:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	default:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	}
	if s.cfg.Username != "" {
		// Over TLS the strongest mechanism the server offers; without TLS PLAIN, which go-mail
		// sends only to localhost, so credentials never cross a network in clear.
		auth := gomail.SMTPAuthAutoDiscover
		if s.cfg.TLS == TLSOff {
			auth = gomail.SMTPAuthPlain
		}
		opts = append(opts, gomail.WithSMTPAuth(auth),
			gomail.WithUsername(s.cfg.Username), gomail.WithPassword(s.cfg.Password))
	}
	return opts
}

// scrub keeps the credentials out of an error that is answered to a bot.
func (s *Sender) scrub(msg string) string {
	for _, secret := range []string{s.cfg.Password, s.cfg.Username} {
		if secret != "" {
			msg = strings.ReplaceAll(msg, secret, "[redacted]")
		}
	}
	return msg
}

func (s *Sender) build(m *Message) (*gomail.Msg, error) {
	msg := gomail.NewMsg()
	if err := msg.FromFormat(m.From.Name, m.From.Address); err != nil {
		return nil, fmt.Errorf("from: %v", err)
	}
	for _, f := range []struct {
		header gomail.AddrHeader
		list   []*mail.Address
	}{{gomail.HeaderTo, m.To}, {gomail.HeaderCc, m.Cc}, {gomail.HeaderBcc, m.Bcc}, {gomail.HeaderReplyTo, m.ReplyTo}} {
		if len(f.list) == 0 {
			continue
		}
		vals := make([]string, len(f.list))
		for i, a := range f.list {
			vals[i] = a.String()
		}
		if err := msg.SetAddrHeader(f.header, vals...); err != nil {
			return nil, fmt.Errorf("%s: %v", f.header, err)
		}
	}
	msg.Subject(m.Subject)
	switch {
	case m.Text != "" && m.HTML != "":
		msg.SetBodyString(gomail.TypeTextPlain, m.Text)
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	case m.HTML != "":
		msg.SetBodyString(gomail.TypeTextHTML, m.HTML)
	default:
		msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	}
	return msg, nil
}

// mayUse says whether project may send from addr: the default sender, or one of its senders.
func (s *Sender) mayUse(project, addr string) bool {
	if s.from != nil && strings.EqualFold(s.from.Address, addr) {
		return true
	}
	for _, a := range s.cfg.Senders[project] {
		if p, err := mail.ParseAddress(a); err == nil && strings.EqualFold(p.Address, addr) {
			return true
		}
	}
	return false
}

// take counts one message of project at now, unless the project has sent RateLimit in the last
// RatePeriod (a sliding window).
func (s *Sender) take(project string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	times := s.sent[project]
	cut := 0
	for cut < len(times) && now.Sub(times[cut]) >= s.cfg.RatePeriod {
		cut++
	}
	times = times[cut:]
	if len(times) >= s.cfg.RateLimit {
		s.sent[project] = times
		return false
	}
	s.sent[project] = append(times, now)
	return true
}
