package email

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// received is one message a test SMTP server accepted.
type received struct {
	from string
	to   []string
	data string
	user string
}

// smtpServer is a real SMTP server (emersion/go-smtp) on loopback that keeps what it receives.
// With user set it requires AUTH PLAIN with user and password.
type smtpServer struct {
	addr           string
	user, password string
	rejectRcpt     string // a recipient it refuses (550)

	mu   sync.Mutex
	msgs []received
}

func startSMTP(t *testing.T, user, password string) *smtpServer {
	t.Helper()
	srv := &smtpServer{user: user, password: password}
	s := smtp.NewServer(srv)
	s.Domain = "localhost"
	s.AllowInsecureAuth = true // loopback, no TLS: the client allows PLAIN to localhost only
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.addr = ln.Addr().String()
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	return srv
}

func (s *smtpServer) NewSession(*smtp.Conn) (smtp.Session, error) { return &smtpSession{srv: s}, nil }

func (s *smtpServer) received() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.msgs...)
}

type smtpSession struct {
	srv  *smtpServer
	user string
	cur  received
}

func (ss *smtpSession) AuthMechanisms() []string {
	if ss.srv.user == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (ss *smtpSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, username, password string) error {
		if username != ss.srv.user || password != ss.srv.password {
			return errors.New("invalid credentials")
		}
		ss.user = username
		return nil
	}), nil
}

func (ss *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	if ss.srv.user != "" && ss.user == "" {
		return smtp.ErrAuthRequired
	}
	ss.cur = received{from: from, user: ss.user}
	return nil
}

func (ss *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if to == ss.srv.rejectRcpt {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such mailbox"}
	}
	ss.cur.to = append(ss.cur.to, to)
	return nil
}

func (ss *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	ss.cur.data = string(b)
	ss.srv.mu.Lock()
	ss.srv.msgs = append(ss.srv.msgs, ss.cur)
	ss.srv.mu.Unlock()
	return nil
}

func (ss *smtpSession) Reset()        { ss.cur = received{} }
func (ss *smtpSession) Logout() error { return nil }
