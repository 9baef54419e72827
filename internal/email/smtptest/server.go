// Package smtptest is a real SMTP server (emersion/go-smtp) on loopback for tests: it keeps the
// messages it receives, and can require AUTH PLAIN or refuse a recipient.
package smtptest

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Message is one message the server accepted: the envelope, the raw data and the user who
// authenticated ("" without authentication).
type Message struct {
	From string
	To   []string
	Data string
	User string
}

// Server is a running test SMTP server. With a user it requires AUTH PLAIN with that user and
// password before MAIL.
type Server struct {
	Addr           string // host:port it listens on
	user, password string

	mu         sync.Mutex
	rejectRcpt string
	msgs       []Message
}

// Start starts a server on 127.0.0.1, closed when the test ends.
func Start(t testing.TB, user, password string) *Server {
	t.Helper()
	srv := &Server{user: user, password: password}
	s := smtp.NewServer(srv)
	s.Domain = "localhost"
	s.AllowInsecureAuth = true // loopback, no TLS: the client allows PLAIN to localhost only
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Addr = ln.Addr().String()
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	return srv
}

// NewSession implements smtp.Backend.
func (s *Server) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{srv: s}, nil }

// Reject makes the server refuse the recipient addr (550).
func (s *Server) Reject(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejectRcpt = addr
}

// Received is what the server has accepted, in order.
func (s *Server) Received() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

type session struct {
	srv  *Server
	user string
	cur  Message
}

func (ss *session) AuthMechanisms() []string {
	if ss.srv.user == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (ss *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, username, password string) error {
		if username != ss.srv.user || password != ss.srv.password {
			return errors.New("invalid credentials")
		}
		ss.user = username
		return nil
	}), nil
}

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	if ss.srv.user != "" && ss.user == "" {
		return smtp.ErrAuthRequired
	}
	ss.cur = Message{From: from, User: ss.user}
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.srv.mu.Lock()
	reject := ss.srv.rejectRcpt
	ss.srv.mu.Unlock()
	if to == reject {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such mailbox"}
	}
	ss.cur.To = append(ss.cur.To, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	ss.cur.Data = string(b)
	ss.srv.mu.Lock()
	ss.srv.msgs = append(ss.srv.msgs, ss.cur)
	ss.srv.mu.Unlock()
	return nil
}

func (ss *session) Reset()        { ss.cur = Message{} }
func (ss *session) Logout() error { return nil }
