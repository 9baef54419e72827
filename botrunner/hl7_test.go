package botrunner

import (
	"strings"
	"testing"
)

const adtA01 = "MSH|^~\\&|SENDER|FAC|RECEIVER|FAC2|20240102030405||ADT^A01|MSG00001|P|2.5.1\n" +
	"PID|1||12345^^^MRN||Doe^John^Q||19800101|M\n" +
	"PV1|1|I|W^389^1\n"

func hl7Event(t *testing.T) Event {
	t.Helper()
	return Event{ContentType: MediaHL7, Input: mustInput(t, MediaHL7, adtA01)}
}

func TestHL7InputAndResults(t *testing.T) {
	tests := []struct {
		name     string
		src      string
		event    func(*testing.T) Event
		wantType string
		want     string // body, or a prefix of it when it ends with "…"
	}{
		{
			name:     "echo the message",
			src:      `export async function handler(m: any, event: any) { return event.input }`,
			event:    hl7Event,
			wantType: ContentTypeHL7,
			want:     strings.ReplaceAll(strings.TrimSuffix(adtA01, "\n"), "\n", "\r"),
		},
		{
			name: "read fields the Medplum way",
			src: `import { Hl7Message } from '@medplum/core';
export async function handler(m: any, event: { input: Hl7Message }) {
  const pid = event.input.getSegment('PID');
  return pid.getField(5).getComponent(2) + ' ' + pid.getField(5).getComponent(1) + ' ' + event.input.getSegment('MSH').getField(9).getComponent(1);
}`,
			event:    hl7Event,
			wantType: ContentTypeHL7, // a string answering an HL7 request is HL7
			want:     "John Doe ADT",
		},
		{
			name:     "build an ACK",
			src:      `export async function handler(m: any, event: any) { return event.input.buildAck() }`,
			event:    hl7Event,
			wantType: ContentTypeHL7,
			want:     "MSH|^~\\&|RECEIVER|FAC2|SENDER|FAC|…",
		},
		{
			name: "parse a message from JSON input, with the global class",
			src: `export async function handler(m: any, event: any) {
  return Hl7Message.parse(event.input.text);
}`,
			event: func(t *testing.T) Event {
				return jsonEvent(t, `{"text": "MSH|^~\\&|A|B|C|D|20240101||ORU^R01|1|P|2.5\rOBX|1|NM|x^y||42"}`)
			},
			wantType: ContentTypeHL7,
			want:     "MSH|^~\\&|A|B|C|D|20240101||ORU^R01|1|P|2.5\rOBX|1|NM|x^y||42",
		},
		{
			name: "date helpers from @medplum/core",
			src: `import { parseHl7DateTime, formatHl7DateTime } from '@medplum/core';
export async function handler() { return { p: parseHl7DateTime('20230508103004-0200'), f: formatHl7DateTime(new Date(Date.UTC(2024, 0, 2, 3, 4, 5))) } }`,
			event:    func(t *testing.T) Event { return jsonEvent(t, `{}`) },
			wantType: ContentTypeJSON,
			want:     `{"p":"2023-05-08T12:30:04.000Z","f":"20240102030405"}`,
		},
		{
			name:     "a string answering a text request stays text",
			src:      `export async function handler(m: any, event: any) { return 'MSH|^~\\&|x' }`,
			event:    func(t *testing.T) Event { return Event{ContentType: MediaText, Input: mustInput(t, MediaText, "hi")} },
			wantType: ContentTypeText,
			want:     "MSH|^~\\&|x",
		},
	}
	r := New(Options{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, r, tc.src, tc.event(t))
			if res.Outcome != OutcomeSuccess {
				t.Fatalf("%v: %s\n%s", res.Outcome, res.Message, res.Console)
			}
			if res.ContentType != tc.wantType {
				t.Errorf("content type = %q, want %q", res.ContentType, tc.wantType)
			}
			body := string(res.Body)
			if prefix, ok := strings.CutSuffix(tc.want, "…"); ok {
				if !strings.HasPrefix(body, prefix) {
					t.Errorf("body = %q, want prefix %q", body, prefix)
				}
			} else if body != tc.want {
				t.Errorf("body = %q, want %q", body, tc.want)
			}
		})
	}
}

func TestConsoleShowsHL7MessagesAsText(t *testing.T) {
	r := New(Options{})
	res := run(t, r, `export async function handler(m: any, event: any) { console.log(event.input) }`, hl7Event(t))
	if res.Outcome != OutcomeSuccess || res.Console != strings.TrimSuffix(adtA01, "\n")+"\n" {
		t.Errorf("%v %q", res.Outcome, res.Console)
	}
}

func TestParseInputToleratesHL7Framing(t *testing.T) {
	want := "MSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5\rPID|1"
	for name, body := range map[string]string{
		"CR":   "MSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5\rPID|1\r",
		"LF":   "MSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5\nPID|1\n",
		"CRLF": "MSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5\r\nPID|1\r\n",
		"MLLP": "\x0bMSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5\rPID|1\r\x1c\r",
		"BOM":  "\ufeffMSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5\rPID|1",
	} {
		t.Run(name, func(t *testing.T) {
			in := mustInput(t, MediaHL7+"; charset=utf-8", body)
			if in.Kind != InputHL7 || in.HL7.String() != want {
				t.Errorf("got %v %q", in.Kind, in.HL7.String())
			}
		})
	}
}
