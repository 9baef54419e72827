package mllp

import (
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/hl7"
)

func mustParse(t *testing.T, s string) *hl7.Message {
	t.Helper()
	m, err := hl7.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

const adt = "MSH|^~\\&|LAB|NORTH|FHIRGATE|CLINIC|20260101120000||ADT^A01^ADT_A01|MSG00001|P|2.5.1\rPID|1||123^^^MRN||Doe^Jane"

func TestModesOf(t *testing.T) {
	cases := []struct {
		msh15, msh16 string
		want         Modes
	}{
		{"", "", Modes{Accept: Never, Application: Always}},
		{"AL", "NE", Modes{Enhanced: true, Accept: Always, Application: Never}},
		{"NE", "AL", Modes{Enhanced: true, Accept: Never, Application: Always}},
		{"er", "su", Modes{Enhanced: true, Accept: OnError, Application: OnSuccess}},
		{"AL", "", Modes{Enhanced: true, Accept: Always, Application: Always}},
		{"XX", "NE", Modes{Enhanced: true, Accept: Always, Application: Never}},
	}
	for _, tc := range cases {
		msg := strings.Replace(adt, "|P|2.5.1", "|P|2.5.1|||"+tc.msh15+"|"+tc.msh16, 1)
		if got := ModesOf(mustParse(t, msg)); got != tc.want {
			t.Errorf("MSH-15 %q MSH-16 %q: got %+v, want %+v", tc.msh15, tc.msh16, got, tc.want)
		}
	}
}

func TestConditionWants(t *testing.T) {
	cases := []struct {
		c    Condition
		code hl7.AckCode
		want bool
	}{
		{Always, hl7.AE, true}, {Never, hl7.AA, false}, {Never, hl7.CA, false},
		{OnError, hl7.AA, false}, {OnError, hl7.AE, true}, {OnError, hl7.AR, true}, {OnError, hl7.CE, true},
		{OnSuccess, hl7.AA, true}, {OnSuccess, hl7.CA, true}, {OnSuccess, hl7.AR, false},
	}
	for _, tc := range cases {
		if got := tc.c.Wants(tc.code); got != tc.want {
			t.Errorf("%s wants %s: got %v", tc.c, tc.code, got)
		}
	}
}

func TestAckCarriesTheErrorEscaped(t *testing.T) {
	b, err := Ack(mustParse(t, adt), hl7.AE, ErrApplicationInternal, "Error: bad|value^here\n    at handler (bot.ts:3)")
	if err != nil {
		t.Fatal(err)
	}
	ack := mustParse(t, string(b))
	msa, _ := ack.Segment("MSA")
	if msa.Field(1).String() != "AE" || msa.Field(2).String() != "MSG00001" {
		t.Fatalf("MSA: %s", msa)
	}
	e, ok := ack.Segment("ERR")
	if !ok {
		t.Fatalf("no ERR segment in %q", b)
	}
	if got := e.Field(3).Component(1, 0, 0); got != "207" {
		t.Errorf("ERR-3: %q", got)
	}
	if got := ack.Delimiters().Decode(e.Field(8).String()); got != "Error: bad|value^here" {
		t.Errorf("ERR-8 decoded: %q (the stack must be cut, delimiters escaped)", got)
	}
	if h := ack.Header(); h.Field(3).String() != "FHIRGATE" || h.Field(5).String() != "LAB" {
		t.Errorf("sender and receiver not swapped: %s", h)
	}
}

func TestAckWithoutDetailHasNoErr(t *testing.T) {
	b, err := Ack(mustParse(t, adt), hl7.AA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "\rERR") {
		t.Fatalf("unexpected ERR: %q", b)
	}
}

func TestRejectIsHL7(t *testing.T) {
	b := Reject(time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC), "not an HL7 message: "+strings.Repeat("é", 300))
	ack := mustParse(t, string(b))
	msa, _ := ack.Segment("MSA")
	if msa.Field(1).String() != "AR" {
		t.Fatalf("MSA: %s", msa)
	}
	e, _ := ack.Segment("ERR")
	if n := len(e.Field(8).String()); n == 0 || n > 200 {
		t.Fatalf("ERR-8 length %d", n)
	}
}
