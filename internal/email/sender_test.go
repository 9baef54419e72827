package email

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/email/smtptest"
	"github.com/fhirgate/fhirgate/internal/fhir"
)

func newSender(t *testing.T, cfg Config) *Sender {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func statusOf(err error) int {
	var fe *fhir.Error
	if errors.As(err, &fe) {
		return fe.Status
	}
	return 0
}

func TestSendThroughARealSMTPServer(t *testing.T) {
	srv := smtptest.Start(t, "bots", "s3cret")
	s := newSender(t, Config{Addr: srv.Addr, Username: "bots", Password: "s3cret", From: "Bots <bots@example.com>", TLS: TLSOff,
		Senders: map[string][]string{"p1": {"alerts@example.org"}}})
	body := `{"to": ["Ann <ann@example.com>", {"name": "Bo", "address": "bo@example.com"}], "cc": "cy@example.com", "bcc": "di@example.com",
  "subject": "Lab result", "text": "Your result is ready.", "html": "<p>Your result is ready.</p>"}`
	if err := s.Send(context.Background(), "p1", []byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), "p1", []byte(`{"from": "alerts@example.org", "to": "ann@example.com", "subject": "s", "text": "t"}`)); err != nil {
		t.Fatal(err)
	}
	got := srv.Received()
	if len(got) != 2 {
		t.Fatalf("server received %d messages", len(got))
	}
	m := got[0]
	if m.From != "bots@example.com" || m.User != "bots" || strings.Join(m.To, ",") != "ann@example.com,bo@example.com,cy@example.com,di@example.com" {
		t.Errorf("envelope %+v", m)
	}
	for _, want := range []string{"Subject: Lab result", `From: "Bots" <bots@example.com>`, "Your result is ready.", "<p>Your result is ready.</p>", "text/html", "Cc: <cy@example.com>"} {
		if !strings.Contains(m.Data, want) {
			t.Errorf("message lacks %q:\n%s", want, m.Data)
		}
	}
	if strings.Contains(m.Data, "di@example.com") {
		t.Error("the Bcc recipient is in the message")
	}
	if got[1].From != "alerts@example.org" {
		t.Errorf("second message from %s", got[1].From)
	}
}

func TestSendRefusals(t *testing.T) {
	srv := smtptest.Start(t, "", "")
	srv.Reject("nobody@example.com")
	s := newSender(t, Config{Addr: srv.Addr, From: "bots@example.com", TLS: TLSOff, RateLimit: 2, RatePeriod: time.Hour,
		Senders: map[string][]string{"p1": {"alerts@example.org"}}})
	ctx := context.Background()
	for _, tc := range []struct {
		project, body string
		status        int
		msg           string
	}{
		{"p2", `{"from": "alerts@example.org", "to": "a@example.com"}`, http.StatusBadRequest, "may not send email from alerts@example.org"},
		{"p1", `{"from": "ceo@example.org", "to": "a@example.com"}`, http.StatusBadRequest, "may not send email from ceo@example.org"},
		{"p1", `{"subject": "nobody to send to"}`, http.StatusBadRequest, "no recipient"},
		{"p1", `{"to": "not an address"}`, http.StatusBadRequest, "not an email address"},
		{"p1", `{"to": "a@example.com", "subject": "a\r\nBcc: x@example.com"}`, http.StatusBadRequest, "line break"},
		{"p1", `{"to": "a@example.com", "attachments": [{"filename": "a.txt", "content": "x"}]}`, http.StatusBadRequest, "attachments are not supported"},
		{"p1", `[1]`, http.StatusBadRequest, "not a JSON object"},
		{"p3", `{"to": "nobody@example.com", "text": "x"}`, http.StatusBadGateway, "no such mailbox"},
	} {
		err := s.Send(ctx, tc.project, []byte(tc.body))
		if statusOf(err) != tc.status || err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Send(%s, %s) = %v, want %d %q", tc.project, tc.body, err, tc.status, tc.msg)
		}
	}
	// p1 has a rate of 2 an hour; p4 is counted apart.
	for i, want := range []int{0, 0, http.StatusTooManyRequests} {
		if err := s.Send(ctx, "p1", []byte(`{"to": "a@example.com", "text": "x"}`)); statusOf(err) != want {
			t.Errorf("message %d: %v, want status %d", i+1, err, want)
		}
	}
	if err := s.Send(ctx, "p4", []byte(`{"to": "a@example.com", "text": "x"}`)); err != nil {
		t.Errorf("another project: %v", err)
	}
}

func TestSendWrongCredentialsAreNotRepeated(t *testing.T) {
	srv := smtptest.Start(t, "bots", "right-password")
	s := newSender(t, Config{Addr: srv.Addr, Username: "bots", Password: "wrong-password", From: "bots@example.com", TLS: TLSOff})
	err := s.Send(context.Background(), "p1", []byte(`{"to": "a@example.com", "text": "x"}`))
	if statusOf(err) != http.StatusBadGateway || strings.Contains(err.Error(), "wrong-password") {
		t.Errorf("err = %v", err)
	}
}

func TestSendMandatoryTLSRefusesAPlainServer(t *testing.T) {
	srv := smtptest.Start(t, "", "")
	s := newSender(t, Config{Addr: srv.Addr, From: "bots@example.com"})
	if err := s.Send(context.Background(), "p1", []byte(`{"to": "a@example.com", "text": "x"}`)); statusOf(err) != http.StatusBadGateway {
		t.Errorf("err = %v, want 502 (no STARTTLS offered)", err)
	}
	if len(srv.Received()) != 0 {
		t.Error("the message went out in plain text")
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Addr: "smtp.example.com"},
		{Addr: "smtp.example.com:x"},
		{Addr: "smtp.example.com:25", From: "not an address"},
		{Addr: "smtp.example.com:25", TLS: "sometimes"},
		{Addr: "smtp.example.com:25", Username: "u"},
		{Addr: "smtp.example.com:25", Senders: map[string][]string{"p": {"nope"}}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}
