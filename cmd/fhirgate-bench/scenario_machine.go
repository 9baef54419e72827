package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
)

// The machine client scenario 8 signs in with; declared in every bench
// Caddyfile. Its membership comes with the declaration.
const (
	benchMachine       = "bench-machine"
	benchMachineSecret = "bench-machine-secret-0123456789abcdef"
)

// machineScenario is scenario 8: client_credentials grants with a client
// secret in Basic, as the Medplum CLI signs in on every command. Each
// grant verifies the secret (remembered after the first), reads the
// client's membership, writes a Login and signs a token; the CPU per grant
// is reported beside the rate.
func (h *harness) machineScenario(ctx context.Context, m *mainInstance) (*scenario, error) {
	s := &scenario{ID: 8, Title: "machine sign-in (POST /oauth2/token, grant_type=client_credentials)"}
	c := h.set.Concurrency
	grant := requestSpec{
		Method: http.MethodPost, URL: "http://" + m.p.sites.gateway + "/oauth2/token",
		Header: map[string]string{
			"Content-Type":  formType,
			"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(benchMachine+":"+benchMachineSecret)),
		},
		Body: "grant_type=client_credentials",
	}
	res, err := h.load(ctx, m.p, "8-client-credentials", h.spec(c, grant))
	if err != nil {
		return s, err
	}
	// No target: the row's throughput and Caddy CPU per request are the
	// grants/s and the CPU of each, reported beside scenario 2's exchanges.
	s.Measurements = append(s.Measurements, &measurement{Name: fmt.Sprintf("client_credentials grants, c=%d", c), Load: res})
	return s, nil
}
