package subscription

import (
	"encoding/json"
	"testing"

	"github.com/fhirgate/fhirgate/internal/store"
)

// TestAuthorsScopeDecidesWhatItsWebhookCarries: the author's access
// decides as the gate does for a read. A user/ scope reads every
// Observation, so it is not checked against a patient compartment; a
// patient/ scope reads its patient's only. Each case writes the
// Observation it must not get first, waits for a full-access
// Subscription to get that one (its deliveries are enqueued together),
// then writes the one it must get: deliveries leave the queue earliest
// first, so by the time that one arrives the first was decided.
func TestAuthorsScopeDecidesWhatItsWebhookCarries(t *testing.T) {
	for _, tc := range []struct {
		name   string
		author store.SubscriptionAuthor
		// The subjects (Patient ids, or none) of the Observations written:
		// denied (if any) must not reach the author's webhook, gets must.
		denied, gets string
	}{
		{"user scope, Observation without subject", store.SubscriptionAuthor{Profile: "Practitioner/carol", Scope: "user/Observation.rs"}, "", "none"},
		{"user scope, a patient's Observation", store.SubscriptionAuthor{Profile: "Practitioner/carol", Scope: "user/Observation.rs"}, "", "p2"},
		{"patient scope", store.SubscriptionAuthor{Profile: "Patient/p1", Scope: "patient/Observation.rs", Patient: "p1"}, "p2", "p1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			scoped, full := newHook(t, 200), newHook(t, 200)
			author := tc.author
			f.subscribe(t, "Observation", scoped.URL, &author)
			f.subscribe(t, "Observation", full.URL, nil)
			write := func(subject string) {
				t.Helper()
				obs := map[string]any{"resourceType": "Observation", "status": "final"}
				if subject != "none" {
					obs["subject"] = map[string]any{"reference": "Patient/" + subject}
				}
				b, _ := json.Marshal(obs)
				if status, body := f.do(t, "POST", "Observation", string(b)); status != 201 {
					t.Fatalf("create: %d %s", status, body)
				}
			}
			if tc.denied != "" {
				write(tc.denied)
				eventually(t, "the full-access webhook", func() bool { return full.count() == 1 })
			}
			write(tc.gets)
			eventually(t, "the scoped author's webhook", func() bool { return scoped.count() >= 1 })
			scoped.mu.Lock()
			defer scoped.mu.Unlock()
			var got struct {
				Subject struct{ Reference string }
			}
			_ = json.Unmarshal(scoped.bodies[0], &got)
			want := "Patient/" + tc.gets
			if tc.gets == "none" {
				want = ""
			}
			if len(scoped.bodies) != 1 || got.Subject.Reference != want {
				t.Fatalf("the scoped author's webhook got %d deliveries, the first about %q; want one about %q", len(scoped.bodies), got.Subject.Reference, want)
			}
		})
	}
}
