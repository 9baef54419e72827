package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fhirgate/fhirgate/internal/userinfo/idptest"
)

// The JWT client is declared beside bench-app: the same identity provider,
// with its key set, so a JWT subject token is verified in the gateway and
// an opaque one still goes to userinfo.
const (
	jwtClient   = "bench-jwt"
	jwtIssuer   = "https://idp.bench.test/"
	jwtAudience = "https://fhir.bench.test"
	// jwtPool is how many distinct signed tokens scenario 9 sends in turn.
	// The gateway keeps no per-token cache of verified JWTs, so a reused
	// token costs the same signature check as a new one.
	jwtPool = 4096
)

// benchIdP is the identity-provider stand-in: userinfo for bench tokens and
// the key set of jwtKey, both counted.
type benchIdP struct {
	key      *idptest.Key
	jwks     []byte
	userinfo http.Handler
	calls    atomic.Int64 // userinfo calls
}

func newBenchIdP() (*benchIdP, error) {
	key, err := idptest.NewKey("RS256", "bench-rs256") // what Auth0, Okta and Entra sign with
	if err != nil {
		return nil, err
	}
	return &benchIdP{key: key, jwks: idptest.JWKS(key), userinfo: newIdP()}, nil
}

func (b *benchIdP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/jwks.json" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b.jwks)
		return
	}
	if r.URL.Path == "/userinfo" {
		b.calls.Add(1)
	}
	b.userinfo.ServeHTTP(w, r)
}

// signedToken is an access token for bench user n, as a provider that puts
// the verified email in its access tokens issues it.
func (b *benchIdP) signedToken(n int, jti string) string {
	now := time.Now()
	return b.key.Sign(map[string]any{
		"iss": jwtIssuer, "aud": jwtAudience, "sub": "bench|" + strconv.Itoa(n),
		"iat": now.Unix(), "exp": now.Add(12 * time.Hour).Unix(), "jti": jti,
		"email": userEmail(n), "email_verified": true,
	})
}

// jwksScenario is scenario 9: exchanges of distinct subject tokens verified
// by signature against the provider's JWKS vs distinct opaque tokens
// through userinfo, through the same client in the same run.
func (h *harness) jwksScenario(ctx context.Context, m *mainInstance) (*scenario, error) {
	s := &scenario{ID: 9, Short: "JWKS exchange", Title: "token exchange: JWKS-verified JWTs vs userinfo (distinct tokens)"}
	c := h.set.Concurrency
	site := m.p.sites.gateway

	// Zero identity-provider calls for verified JWTs with the claims, counted
	// at the stand-in over exchanges made one by one.
	const probe = 50
	before := h.idp.calls.Load()
	for i := range probe {
		if err := exchangeOnce(ctx, site, jwtClient, h.idp.signedToken(i%declaredUsers, h.tokenTail("7-probe-"+strconv.Itoa(i)))); err != nil {
			return s, fmt.Errorf("probe exchange %d: %w", i, err)
		}
	}
	calls := h.idp.calls.Load() - before
	s.Measurements = append(s.Measurements, &measurement{
		Name: fmt.Sprintf("userinfo calls for %d JWKS-verified exchanges", probe), Value: float64(calls), Unit: "calls",
	})

	reqs := make([]requestSpec, jwtPool)
	for i := range reqs {
		reqs[i] = jwtExchangePOST(site, jwtClient, h.idp.signedToken(i%declaredUsers, h.tokenTail("7-"+strconv.Itoa(i))))
	}
	jwks := loadSpec{Requests: reqs, Concurrency: c, Warmup: h.set.Warmup, Duration: h.set.Measure}
	viaUserinfo := h.spec(c, jwtExchangePOST(site, jwtClient, h.distinctTokens(declaredUsers, "7-userinfo")))
	a, b, err := h.compare(ctx,
		namedLoad{m.p, "7-exchange-jwks", jwks},
		namedLoad{m.p, "7-exchange-userinfo", viaUserinfo})
	if err != nil {
		return s, err
	}
	s.Measurements = append(s.Measurements,
		&measurement{Label: "JWT by JWKS", Name: fmt.Sprintf("exchange, JWT verified by JWKS (RS256, %d distinct tokens in turn), c=%d", jwtPool, c), Load: a},
		&measurement{Label: "opaque, userinfo", Name: fmt.Sprintf("exchange, opaque token through userinfo (every token distinct), c=%d", c), Load: b})
	s.Checks = append(s.Checks,
		newCheck("exchanges/s ratio JWKS/userinfo", ratio(a.Throughput, b.Throughput), ">=", 1.2, ""),
		newCheck(fmt.Sprintf("userinfo calls for %d verified JWTs", probe), float64(calls), "<=", 0, ""),
	)
	return s, nil
}

// jwtExchangePOST is a token exchange through client; subject may hold
// placeholders and needs no URL encoding (JWTs and bench tokens are
// base64url and dots).
func jwtExchangePOST(site, client, subject string) requestSpec {
	body := "grant_type=" + url.QueryEscape(tokenExchangeGrant) + "&client_id=" + client +
		"&subject_token=" + subject + "&subject_token_type=" + url.QueryEscape(accessTokenType)
	return requestSpec{
		Method: http.MethodPost, URL: "http://" + site + "/oauth2/token",
		Header: map[string]string{"Content-Type": formType}, Body: body,
	}
}

// exchangeOnce makes one exchange and fails on anything but 200.
func exchangeOnce(ctx context.Context, site, client, subject string) error {
	r := jwtExchangePOST(site, client, subject)
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, strings.NewReader(r.Body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", formType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	return nil
}
