package oauth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/internal/store"
)

// TestExchangeMatchesEmailWithoutUnicodeFolding: an identity provider
// vouching for "\u212Aate@a.test" (KELVIN SIGN) does not sign in as
// kate@a.test; the exact address, in any ASCII case, does.
func TestExchangeMatchesEmailWithoutUnicodeFolding(t *testing.T) {
	e := newEnv(t)
	vouches := map[string]string{"kelvin": `\u212Aate@a.test`, "exact": "kate@a.test", "upper": "KATE@a.test"}
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		email := vouches[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		jsonUser(w, `{"email":"`+email+`","email_verified":true}`)
	}))
	t.Cleanup(idp.Close)
	c := &store.ClientApplication{Name: "kelvin", IdentityProvider: &store.IdentityProvider{UserInfoURL: idp.URL}}
	c.Meta.Project = "p1"
	e.put(c, "kelvin")
	e.membership("p1", e.user("kate@a.test"), "Practitioner/kate", "", nil)

	rec := e.exchange("kelvin", "kelvin")
	if body := decode(t, rec); rec.Code != 400 || body["error"] != "invalid_grant" ||
		!strings.Contains(body["error_description"].(string), "no user") {
		fail(t, rec, "the Kelvin-sign address")
	}
	for _, exact := range []string{"exact", "upper"} {
		if rec := e.exchange("kelvin", exact); rec.Code != 200 {
			fail(t, rec, "exchange for %s", vouches[exact])
		}
	}
}
