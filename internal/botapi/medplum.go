package botapi

import (
	"context"
	"net/http"
	"net/url"

	"github.com/fhirgate/fhirgate/internal/gateway"
)

// medplumClient is what a bot's `medplum` argument calls: FHIR requests to
// the backend behind the gateway, made as the caller and carrying the run's
// trace id, so the backend's logs tie them to the bot run.
type medplumClient struct {
	backend *gateway.Backend
	traceID string
}

// Do implements botrunner.MedplumClient.
func (c medplumClient) Do(ctx context.Context, method, path string, query url.Values, body []byte, contentType string, header http.Header) (int, string, []byte, error) {
	h := header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	h.Set("X-Trace-Id", c.traceID)
	resp, err := c.backend.Do(ctx, method, path, query, body, h)
	if err != nil {
		return 0, "", nil, err
	}
	return resp.Status, resp.Header.Get("Content-Type"), resp.Body, nil
}
