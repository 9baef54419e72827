package botrunner

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// intlCase is one line of testdata/intl/node22.json: a call and what Node 22 answers.
type intlCase struct {
	Fn      string          `json:"fn"`
	Locale  json.RawMessage `json:"locale,omitempty"`
	Options json.RawMessage `json:"options,omitempty"`
	Value   string          `json:"value"`
	Want    string          `json:"want"`
}

// intlBot runs each case of its input (as gen.js does in Node) and answers the results, or
// "THROW name: message".
const intlBot = `
const run = {
  dtf: (l, o, v) => new Intl.DateTimeFormat(l, o).format(v),
  dtfParts: (l, o, v) => JSON.stringify(new Intl.DateTimeFormat(l, o).formatToParts(v)),
  toLocaleString: (l, o, v) => new Date(v).toLocaleString(l, o),
  toLocaleDateString: (l, o, v) => new Date(v).toLocaleDateString(l, o),
  toLocaleTimeString: (l, o, v) => new Date(v).toLocaleTimeString(l, o),
  nf: (l, o, v) => new Intl.NumberFormat(l, o).format(v),
  nfParts: (l, o, v) => JSON.stringify(new Intl.NumberFormat(l, o).formatToParts(v)),
  numberToLocaleString: (l, o, v) => v.toLocaleString(l, o),
};
exports.handler = async (medplum, event) => event.input.map((c) => {
  try {
    return run[c.fn](c.locale, c.options, Number(c.value));
  } catch (e) {
    return 'THROW ' + e.name + ': ' + e.message;
  }
});`

func runIntlCases(t *testing.T, ex Executor, cases []intlCase) []string {
	t.Helper()
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	res := counterRun(t, ex, mustCompile(t, "index.js", intlBot).JS, counterReq{input: string(in), key: "intl", bot: "intl"})
	if res.Outcome != OutcomeSuccess {
		t.Fatalf("run: %s %s", res.Outcome, res.Message)
	}
	var got []string
	if err := json.Unmarshal(res.Body, &got); err != nil || len(got) != len(cases) {
		t.Fatalf("body %.300s: %v (%d answers for %d cases)", res.Body, err, len(got), len(cases))
	}
	return got
}

// TestIntlMatchesNode formats every case of the table generated with Node 22 (gen.js) and
// wants Node's exact string.
func TestIntlMatchesNode(t *testing.T) {
	b, err := os.ReadFile("testdata/intl/node22.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []intlCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	got := runIntlCases(t, New(Options{}), cases)
	bad := 0
	for i, c := range cases {
		if got[i] != c.Want {
			bad++
			if bad <= 40 {
				t.Errorf("%s(%s, %s, %s) = %q, Node: %q", c.Fn, c.Locale, c.Options, c.Value, got[i], c.Want)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d cases differ from Node", bad, len(cases))
	}
}

// TestIntlRefusesWhatItCannotFormat: another locale, an option value it does not implement, or
// a field combination whose pattern it does not reproduce is a RangeError naming it, in both
// isolation modes; bad values are Node's errors.
func TestIntlRefusesWhatItCannotFormat(t *testing.T) {
	cases := []intlCase{
		{Fn: "dtf", Locale: json.RawMessage(`"fr-FR"`), Value: "0", Want: "THROW RangeError: The locale 'fr-FR' is not supported"},
		{Fn: "nf", Locale: json.RawMessage(`["de-DE","en-US"]`), Value: "1", Want: "THROW RangeError: The locale 'de-DE' is not supported"},
		{Fn: "toLocaleDateString", Locale: json.RawMessage(`"en-GB"`), Value: "0", Want: "THROW RangeError: The locale 'en-GB' is not supported"},
		{Fn: "numberToLocaleString", Locale: json.RawMessage(`"ja"`), Value: "1", Want: "THROW RangeError: The locale 'ja' is not supported"},
		{Fn: "dtf", Locale: json.RawMessage(`"x!"`), Value: "0", Want: "THROW RangeError: Incorrect locale information provided"},
		{Fn: "dtf", Options: json.RawMessage(`{"era":"short"}`), Value: "0", Want: "THROW RangeError: Intl.DateTimeFormat option era is not supported"},
		{Fn: "dtf", Options: json.RawMessage(`{"timeZoneName":"shortOffset"}`), Value: "0", Want: "THROW RangeError: Intl.DateTimeFormat option timeZoneName: 'shortOffset' is not supported"},
		{Fn: "dtf", Options: json.RawMessage(`{"timeZoneName":"long","timeZone":"Europe/Paris"}`), Value: "0", Want: "THROW RangeError: Intl.DateTimeFormat timeZoneName 'long' for the time zone Europe/Paris is not supported"},
		{Fn: "dtf", Options: json.RawMessage(`{"hourCycle":"h11","hour":"numeric"}`), Value: "0", Want: "THROW RangeError: Intl.DateTimeFormat option hourCycle: 'h11' is not supported"},
		{Fn: "dtf", Options: json.RawMessage(`{"year":"numeric","day":"numeric"}`), Value: "0", Want: "THROW RangeError: Intl.DateTimeFormat with the fields year, day is not supported"},
		{Fn: "dtf", Options: json.RawMessage(`{"minute":"numeric"}`), Value: "0", Want: "THROW RangeError: Intl.DateTimeFormat with the fields minute is not supported"},
		{Fn: "dtf", Options: json.RawMessage(`{"weekday":"bogus"}`), Value: "0", Want: "THROW RangeError: Value bogus out of range for Intl.DateTimeFormat options property weekday"},
		{Fn: "dtf", Options: json.RawMessage(`{"timeZone":"Mars/Olympus"}`), Value: "0", Want: "THROW RangeError: Invalid time zone specified: Mars/Olympus"},
		{Fn: "dtf", Options: json.RawMessage(`{"timeZone":"Local"}`), Value: "0", Want: "THROW RangeError: Invalid time zone specified: Local"},
		{Fn: "dtf", Options: json.RawMessage(`{"dateStyle":"short","year":"numeric"}`), Value: "0", Want: "THROW TypeError: Invalid option : option"},
		{Fn: "dtf", Value: "NaN", Want: "THROW RangeError: Invalid time value"},
		{Fn: "toLocaleString", Value: "NaN", Want: "Invalid Date"},
		{Fn: "nf", Options: json.RawMessage(`{"style":"unit","unit":"meter"}`), Value: "1", Want: "THROW RangeError: Intl.NumberFormat option style: 'unit' is not supported"},
		{Fn: "nf", Options: json.RawMessage(`{"notation":"compact"}`), Value: "1", Want: "THROW RangeError: Intl.NumberFormat option notation: 'compact' is not supported"},
		{Fn: "nf", Options: json.RawMessage(`{"style":"currency","currency":"USD","currencyDisplay":"name"}`), Value: "1", Want: "THROW RangeError: Intl.NumberFormat option currencyDisplay: 'name' is not supported"},
		{Fn: "nf", Options: json.RawMessage(`{"style":"currency"}`), Value: "1", Want: "THROW TypeError: Currency code is required with currency style."},
		{Fn: "nf", Options: json.RawMessage(`{"currency":"US"}`), Value: "1", Want: "THROW RangeError: Invalid currency code : US"},
		{Fn: "nf", Options: json.RawMessage(`{"minimumFractionDigits":5,"maximumFractionDigits":2}`), Value: "1", Want: "THROW RangeError: maximumFractionDigits value is out of range."},
		{Fn: "nf", Options: json.RawMessage(`{"roundingMode":"floor"}`), Value: "1", Want: "THROW RangeError: Intl.NumberFormat option roundingMode: 'floor' is not supported"},
	}
	for name, ex := range executors(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			got := runIntlCases(t, ex, cases)
			for i, c := range cases {
				if !strings.HasPrefix(got[i], c.Want) {
					t.Errorf("%s(%s, %s, %s) = %q, want %q…", c.Fn, c.Locale, c.Options, c.Value, got[i], c.Want)
				}
			}
		})
	}
}
