package hl7

import (
	"crypto/rand"
	"fmt"
	"strings"
	"time"
)

// AckCode is an acknowledgment code for MSA-1.
type AckCode string

// Acknowledgment codes (HL7 table 0008).
const (
	AA AckCode = "AA" // application accept
	AE AckCode = "AE" // application error
	AR AckCode = "AR" // application reject
	CA AckCode = "CA" // commit accept
	CE AckCode = "CE" // commit error
	CR AckCode = "CR" // commit reject
)

// Text returns Medplum's MSA-3 text for the code ("OK" for AA), or "" for
// an unknown code.
func (c AckCode) Text() string {
	switch c {
	case AA:
		return "OK"
	case AE:
		return "Application Error"
	case AR:
		return "Application Reject"
	case CA:
		return "Commit Accept"
	case CE:
		return "Commit Error"
	case CR:
		return "Commit Reject"
	}
	return ""
}

// AckOptions configure BuildAck. The zero value builds an AA acknowledgment.
type AckOptions struct {
	// Code is MSA-1. Default: AA.
	Code AckCode
	// Text is MSA-3, encoded. Default: Code.Text(), Medplum's text.
	Text string
	// ErrSegment is appended after MSA when not empty: wire text of a whole
	// segment such as `ERR|||207^Application internal error^HL70357|E`.
	ErrSegment string
	// Now is the time written to MSH-7. Default: time.Now().
	Now time.Time
	// ControlID is MSH-10, encoded. Default: a fresh 20-digit id.
	ControlID string
}

// BuildAck returns an acknowledgment of m in m's delimiters, as Medplum's
// buildAck does: MSH-3/4 are the original MSH-5/6 and MSH-5/6 the original
// MSH-3/4 (whole fields, as sent), MSH-7 is Now in UTC, MSH-9 is ACK,
// ACK^<trigger> or ACK^<trigger>^ACK following the shape of the original
// MSH-9, MSH-10 a new control id, MSH-11 P, MSH-12 the original version or
// 2.5.1, then MSA|<code>|<original MSH-10>|<text> and the optional ERR
// segment.
func (m *Message) BuildAck(opts AckOptions) (*Message, error) {
	code := opts.Code
	if code == "" {
		code = AA
	}
	if code.Text() == "" {
		return nil, fmt.Errorf("building ACK: unknown acknowledgment code %q", string(code))
	}
	text := opts.Text
	if text == "" {
		text = code.Text()
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	id := opts.ControlID
	if id == "" {
		id = NewControlID(now)
	}
	msh := m.Header()
	version := msh.Field(12).String()
	if version == "" {
		version = "2.5.1"
	}
	d := m.delims
	field := func(b *strings.Builder, v string) {
		b.WriteByte(d.Field)
		b.WriteString(v)
	}
	var b strings.Builder
	b.WriteString("MSH")
	field(&b, d.Encoding())
	field(&b, msh.Field(5).String())
	field(&b, msh.Field(6).String())
	field(&b, msh.Field(3).String())
	field(&b, msh.Field(4).String())
	field(&b, FormatDateTime(now))
	field(&b, "")
	field(&b, ackType(msh.Field(9)))
	field(&b, d.Encode(id))
	field(&b, "P")
	field(&b, version)
	b.WriteByte('\r')
	b.WriteString("MSA")
	field(&b, string(code))
	field(&b, msh.Field(10).String())
	field(&b, d.Encode(text))
	if opts.ErrSegment != "" {
		if err := m.checkSegmentText(opts.ErrSegment); err != nil {
			return nil, fmt.Errorf("building ACK: ERR segment: %w", err)
		}
		b.WriteByte('\r')
		b.WriteString(opts.ErrSegment)
	}
	ack, err := Parse(b.String())
	if err != nil {
		return nil, fmt.Errorf("building ACK: %w", err)
	}
	return ack, nil
}

// ackType mirrors the original MSH-9: HL7 2.1 has one component, 2.2-2.3
// add the trigger event, 2.3.1+ the message structure. Medplum tests for
// non-empty components rather than counting them.
func ackType(msgType Field) string {
	c := string(msgType.d.Component)
	rep, _ := nth(msgType.raw, msgType.d.Repetition, 0)
	trigger, _ := nth(rep, msgType.d.Component, 1)
	structure, _ := nth(rep, msgType.d.Component, 2)
	switch {
	case trigger != "" && structure != "":
		return "ACK" + c + trigger + c + "ACK"
	case trigger != "":
		return "ACK" + c + trigger
	}
	return "ACK"
}

// NewControlID returns a message control id (MSH-10) for a message sent at
// now: 13 digits of Unix milliseconds (Medplum uses Date.now()) and 7
// random digits, so ids made in the same millisecond differ. 20 characters
// is the MSH-10 limit up to v2.8.
func NewControlID(now time.Time) string {
	var r [4]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails (Go 1.24+)
	n := (uint32(r[0])<<24 | uint32(r[1])<<16 | uint32(r[2])<<8 | uint32(r[3])) % 10_000_000
	return fmt.Sprintf("%013d%07d", now.UnixMilli(), n)
}
