package hl7

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestBuildAckForEveryCode(t *testing.T) {
	orig := mustParse(t, readSample(t, "adt_a01.hl7"))
	now := time.Date(2024, 3, 12, 13, 15, 30, 5e6, time.FixedZone("EST", -5*3600))
	tests := []struct {
		code AckCode
		text string
	}{
		{AA, "OK"},
		{AE, "Application Error"},
		{AR, "Application Reject"},
		{CA, "Commit Accept"},
		{CE, "Commit Error"},
		{CR, "Commit Reject"},
	}
	for _, tt := range tests {
		t.Run(string(tt.code), func(t *testing.T) {
			ack, err := orig.BuildAck(AckOptions{Code: tt.code, Now: now, ControlID: "ACK1"})
			if err != nil {
				t.Fatal(err)
			}
			want := "MSH|^~\\&|RSP1P8|GOOD HEALTH HOSPITAL|REGADT|GOOD HEALTH HOSPITAL|20240312181530.005||ACK^A01^ACK|ACK1|P|2.5.1\r" +
				"MSA|" + string(tt.code) + "|ADT000123456|" + tt.text
			if ack.String() != want {
				t.Errorf("ACK =\n%q\nwant\n%q", ack.String(), want)
			}
		})
	}
}

func TestBuildAckSwapsSenderAndReceiver(t *testing.T) {
	orig := mustParse(t, "MSH|^~\\&|SAPP^1.2^ISO|SFAC|RAPP|RFAC&x|20240101||ORU^R01|C-9|P|2.3")
	ack, err := orig.BuildAck(AckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	msh := ack.Header()
	for i, want := range map[int]string{3: "RAPP", 4: "RFAC&x", 5: "SAPP^1.2^ISO", 6: "SFAC", 9: "ACK^R01", 11: "P", 12: "2.3"} {
		if got := msh.Field(i).String(); got != want {
			t.Errorf("ACK MSH-%d = %q, want %q", i, got, want)
		}
	}
	msa, ok := ack.Segment("MSA")
	if !ok || msa.Field(1).String() != "AA" || msa.Field(2).String() != "C-9" || msa.Field(3).String() != "OK" {
		t.Errorf("MSA = %q", msa.String())
	}
	if !regexp.MustCompile(`^\d{20}$`).MatchString(msh.Field(10).String()) {
		t.Errorf("MSH-10 = %q, want a 20-digit control id", msh.Field(10).String())
	}
	if _, err := ParseDateTime(msh.Field(7).String(), nil); err != nil {
		t.Errorf("MSH-7: %v", err)
	}
	other, _ := orig.BuildAck(AckOptions{})
	if other.Header().Field(10).String() == msh.Field(10).String() {
		t.Errorf("two ACKs share control id %q", msh.Field(10).String())
	}
}

func TestBuildAckMessageTypeFollowsOriginalShape(t *testing.T) {
	tests := []struct {
		name, msh9, version, want, wantVersion string
	}{
		{"v2.1 one component", "ADT", "2.1", "ACK", "2.1"},
		{"v2.2 trigger", "ADT^A01", "2.2", "ACK^A01", "2.2"},
		{"v2.5.1 structure", "ADT^A01^ADT_A01", "2.5.1", "ACK^A01^ACK", "2.5.1"},
		{"empty trigger", "ADT^^ADT_A01", "2.5", "ACK", "2.5"},
		{"empty structure", "ADT^A01^", "2.4", "ACK^A01", "2.4"},
		{"no version", "ADT^A01", "", "ACK^A01", "2.5.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := "MSH|^~\\&|S|SF|R|RF|20240101||" + tt.msh9 + "|CTL|P"
			if tt.version != "" {
				text += "|" + tt.version
			}
			ack, err := mustParse(t, text).BuildAck(AckOptions{Code: AE})
			if err != nil {
				t.Fatal(err)
			}
			if got := ack.Header().Field(9).String(); got != tt.want {
				t.Errorf("MSH-9 = %q, want %q", got, tt.want)
			}
			if got := ack.Header().Field(12).String(); got != tt.wantVersion {
				t.Errorf("MSH-12 = %q, want %q", got, tt.wantVersion)
			}
		})
	}
}

func TestBuildAckOptions(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		opts    AckOptions
		wantErr string
		check   func(t *testing.T, ack *Message)
	}{
		{
			name: "ERR segment appended",
			text: "MSH|^~\\&|S|SF|R|RF|20240101||ADT^A01|CTL|P|2.5.1",
			opts: AckOptions{Code: AE, ErrSegment: "ERR|||207^Application internal error^HL70357|E"},
			check: func(t *testing.T, ack *Message) {
				if ack.NumSegments() != 3 {
					t.Fatalf("segments = %d", ack.NumSegments())
				}
				if got := ack.AllSegments("ERR")[0].Component(3, 2, Whole, 0); got != "Application internal error" {
					t.Errorf("ERR-3.2 = %q", got)
				}
			},
		},
		{
			name: "custom text is encoded",
			text: "MSH|^~\\&|S|SF|R|RF|20240101||ADT^A01|CTL|P|2.5.1",
			opts: AckOptions{Code: AR, Text: "bad PID-3 | MRN"},
			check: func(t *testing.T, ack *Message) {
				msa, _ := ack.Segment("MSA")
				if msa.Field(3).String() != `bad PID-3 \F\ MRN` || msa.Component(3, 1, Whole, 0) != "bad PID-3 | MRN" {
					t.Errorf("MSA-3 = %q", msa.Field(3).String())
				}
			},
		},
		{
			name: "original delimiters kept",
			text: "MSH#^~\\&#S#SF#R#RF#20240101##SIU^S12^SIU_S12#CTL#P#2.5.1",
			opts: AckOptions{Code: CA},
			check: func(t *testing.T, ack *Message) {
				if !strings.HasPrefix(ack.String(), "MSH#^~\\&#R#RF#S#SF#") || !strings.HasSuffix(ack.String(), "\rMSA#CA#CTL#Commit Accept") {
					t.Errorf("ACK = %q", ack.String())
				}
			},
		},
		{
			name: "short MSH",
			text: "MSH|^~\\&",
			opts: AckOptions{},
			check: func(t *testing.T, ack *Message) {
				if !strings.HasPrefix(ack.String(), "MSH|^~\\&|||||") || !strings.HasSuffix(ack.String(), "||ACK|"+ack.Header().Field(10).String()+"|P|2.5.1\rMSA|AA||OK") {
					t.Errorf("ACK = %q", ack.String())
				}
			},
		},
		{name: "unknown code", text: "MSH|^~\\&", opts: AckOptions{Code: "XX"}, wantErr: `unknown acknowledgment code "XX"`},
		{name: "ERR with line break", text: "MSH|^~\\&", opts: AckOptions{ErrSegment: "ERR|1\rZZZ"}, wantErr: "line break"},
		{name: "ERR not a segment", text: "MSH|^~\\&", opts: AckOptions{ErrSegment: "|||"}, wantErr: "building ACK"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ack, err := mustParse(t, tt.text).BuildAck(tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, ack)
		})
	}
}
