package tokens

import (
	"context"
	"testing"
	"time"
)

func TestAccessTokenCarriesScopeAndPatientContext(t *testing.T) {
	e := newEnv(t, Options{})
	for _, tc := range []struct{ name, scope, patient string }{
		{"patient context", "openid patient/Observation.rs", "p-1"},
		{"no patient context", "user/*.cruds", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, _, err := e.svc.IssueAccess(AccessClaims{
				Sub: "user-1", ClientID: "client-1", LoginID: "login-1",
				Profile: "Patient/p-1", Scope: tc.scope, Patient: tc.patient,
			}, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			c, err := e.svc.Verify(context.Background(), tok, KindAccess)
			if err != nil {
				t.Fatal(err)
			}
			if c.Scope != tc.scope || c.Patient != tc.patient {
				t.Fatalf("claims scope %q patient %q, want %q %q", c.Scope, c.Patient, tc.scope, tc.patient)
			}
			// On the wire: "patient" only with a patient context (SMART's
			// claim name), "scope" always.
			payload := decodePart(t, tok, 1)
			if _, ok := payload["patient"]; ok != (tc.patient != "") {
				t.Fatalf("wire claims %v", payload)
			}
			if payload["scope"] != tc.scope {
				t.Fatalf("wire scope %v", payload["scope"])
			}
		})
	}
}
