package mllp

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fhirgate/fhirgate/internal/hl7"
)

// Condition is an acknowledgment condition of MSH-15 (accept) or MSH-16
// (application), HL7 table 0155.
type Condition string

// The conditions of table 0155.
const (
	Always      Condition = "AL"
	Never       Condition = "NE"
	OnError     Condition = "ER"
	OnSuccess   Condition = "SU"
	unspecified Condition = ""
)

// Modes are the acknowledgments a message asks for.
type Modes struct {
	// Enhanced is HL7's enhanced acknowledgment mode: the message names
	// MSH-15 or MSH-16. In original mode (neither) the receiver answers
	// one application acknowledgment, whatever happens.
	Enhanced bool
	// Accept (MSH-15) says when to send a commit acknowledgment (CA, CE,
	// CR) as soon as the message is taken in, before it is processed.
	Accept Condition
	// Application (MSH-16) says when to send the application
	// acknowledgment (AA, AE, AR) once it is processed.
	Application Condition
}

// ModesOf reads MSH-15 and MSH-16. In enhanced mode an empty condition
// means Always, as table 0155's default; an unknown value too, since
// answering is safer than leaving a sender waiting.
func ModesOf(m *hl7.Message) Modes {
	msh := m.Header()
	accept := Condition(strings.ToUpper(strings.TrimSpace(msh.Field(15).String())))
	app := Condition(strings.ToUpper(strings.TrimSpace(msh.Field(16).String())))
	if accept == unspecified && app == unspecified {
		return Modes{Accept: Never, Application: Always}
	}
	return Modes{Enhanced: true, Accept: known(accept), Application: known(app)}
}

func known(c Condition) Condition {
	switch c {
	case Always, Never, OnError, OnSuccess:
		return c
	}
	return Always
}

// Wants says whether an acknowledgment with code is sent under c.
func (c Condition) Wants(code hl7.AckCode) bool {
	switch c {
	case Never:
		return false
	case OnError:
		return code != hl7.AA && code != hl7.CA
	case OnSuccess:
		return code == hl7.AA || code == hl7.CA
	}
	return true
}

// Application error codes of HL7 table 0357 written into ERR-3.
const (
	ErrApplicationInternal = "207^Application internal error^HL70357"
	ErrSegmentSequence     = "100^Segment sequence error^HL70357"
)

// Ack builds the acknowledgment of m with code; a non-empty detail (why
// the message failed) goes into an ERR segment, escaped, with errCode in
// ERR-3 and severity E.
func Ack(m *hl7.Message, code hl7.AckCode, errCode, detail string) ([]byte, error) {
	opts := hl7.AckOptions{Code: code}
	if detail != "" {
		d := m.Delimiters()
		f := string(d.Field)
		opts.ErrSegment = "ERR" + f + f + f + errCode + f + "E" + f + f + f + f + d.Encode(oneLine(detail))
	}
	ack, err := m.BuildAck(opts)
	if err != nil {
		return nil, err
	}
	return []byte(ack.String()), nil
}

// Reject builds the AR answered for a frame that is not an HL7 message, so
// it has no header to mirror: default delimiters, an empty MSA-2, and the
// reason in ERR-8.
func Reject(now time.Time, reason string) []byte {
	d := hl7.DefaultDelimiters
	var b strings.Builder
	b.WriteString("MSH|")
	b.WriteString(d.Encoding())
	b.WriteString("|||||")
	b.WriteString(hl7.FormatDateTime(now))
	b.WriteString("||ACK|")
	b.WriteString(hl7.NewControlID(now))
	b.WriteString("|P|2.5.1\rMSA|AR||")
	b.WriteString(hl7.AR.Text())
	b.WriteString("\rERR|||" + ErrSegmentSequence + "|E||||")
	b.WriteString(d.Encode(oneLine(reason)))
	return []byte(b.String())
}

// oneLine keeps a message's first line and at most 200 bytes of it: an ERR
// field is no place for a stack trace.
func oneLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	s = strings.ToValidUTF8(strings.TrimSpace(s), "\uFFFD")
	if len(s) > 200 {
		s = s[:200]
		for !utf8.ValidString(s) { // do not split a UTF-8 sequence
			s = s[:len(s)-1]
		}
	}
	return s
}
