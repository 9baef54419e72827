package e2e

import (
	"encoding/json"
	"testing"
)

// globalsBotSource is a webhook-signing bot of the kind the Node globals are for: it waits on a
// timer, signs its input with createHmac, encodes with Buffer, formats a date in a named time
// zone and an amount with Intl, and digests with Web Crypto.
const globalsBotSource = `const { createHmac } = require('node:crypto');
exports.handler = async (medplum, event) => {
  await new Promise((resolve) => setTimeout(resolve, 10));
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode('abc'));
  return {
    sig: createHmac('sha256', 'secret').update(JSON.stringify(event.input)).digest('hex'),
    b64: Buffer.from('fhirgate').toString('base64'),
    when: new Date(Date.UTC(2026, 10, 20, 17, 5, 9)).toLocaleString('en-US', { timeZone: 'America/New_York', dateStyle: 'full', timeStyle: 'short' }),
    amount: new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD' }).format(1234.5),
    digest: Buffer.from(digest).toString('hex').slice(0, 16),
    clone: structuredClone({ d: new Date(0) }).d instanceof Date,
  };
};`

// TestBotGlobalsThroughCaddy runs that bot in the built binary's bot workers (whose environment
// has no TZ: the time zone comes from the database built into the binary), on a fresh instance
// and then a warm one, and wants what Node 22 answers for the same code.
func TestBotGlobalsThroughCaddy(t *testing.T) {
	s := startStack(t, "")
	auth := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")}
	id := deployBot(t, s, auth, "globals", globalsBotSource, 0)
	want := map[string]any{
		"sig":    "aa9e2e3575f5d7098b6caccd790888c36d5fdb63342a73bada2d6a51747a8494",
		"b64":    "ZmhpcmdhdGU=",
		"when":   "Friday, November 20, 2026 at 12:05 PM",
		"amount": "$1,234.50",
		"digest": "ba7816bf8f01cfea",
		"clone":  true,
	}
	for range 2 { // a fresh instance, then the warm one
		r := do(t, "POST", s.gateway+"/fhir/R4/Bot/"+id+"/$execute", "application/json", `{"a":1}`, auth...)
		if r.status != 200 {
			t.Fatalf("execute: %d %s", r.status, r.body)
		}
		var got map[string]any
		if err := json.Unmarshal(r.body, &got); err != nil {
			t.Fatalf("%s: %v", r.body, err)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %v, Node answers %v", k, got[k], v)
			}
		}
	}
}
