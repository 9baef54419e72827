package e2e

import (
	"io"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/internal/email/smtptest"
)

// emailOptions reads a message fhirgate sent through the SMTP server back into the shape of
// Medplum's email options as the differential suite's bots write them (to, subject, text), so
// that it compares with what Medplum's server received. A text/plain body only: the suite's bots
// send no HTML.
func emailOptions(t *testing.T, m smtptest.Message) map[string]any {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(m.Data))
	if err != nil {
		t.Fatalf("the SMTP server received an unreadable message: %v", err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		t.Fatal(err)
	}
	var body io.Reader = msg.Body
	if strings.EqualFold(msg.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		body = quotedprintable.NewReader(body)
	}
	text, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"to": strings.Join(m.To, ", "), "subject": subject, "text": strings.TrimRight(string(text), "\r\n")}
}
