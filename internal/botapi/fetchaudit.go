package botapi

import (
	"net/http"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/store"
)

// Egress hands out each project's HTTP client, held to the project's
// egress allow-list (*egress.Egress).
type Egress interface {
	For(projectID string) (*http.Client, error)
}

// fetchExtensionURL names the extension of a run's AuditEvent that lists
// the run's fetch calls.
const fetchExtensionURL = "https://fhirgate.dev/fhir/StructureDefinition/bot-fetch"

// newFetcher is the Fetcher of one run of a bot of project: through the
// project's egress client, got on the run's first fetch.
func (a *API) newFetcher(project string) *botrunner.HTTPFetcher {
	if a.o.Egress == nil {
		return nil
	}
	return &botrunner.HTTPFetcher{Client: func() (*http.Client, error) { return a.o.Egress.For(project) }}
}

// addFetches records the run's fetch calls in its AuditEvent: for each of
// the first botrunner.MaxFetchRecords, the host, the outcome, the status
// and the bytes each way; never headers or bodies. The count says how many
// there were in all.
func addFetches(ev *store.AuditEvent, f *botrunner.HTTPFetcher) {
	if ev == nil || f == nil {
		return
	}
	recs, total := f.Records()
	if total == 0 {
		return
	}
	n := int64(total)
	ext := store.Extension{URL: fetchExtensionURL, Extension: []store.Extension{{URL: "count", ValueInteger: &n}}}
	for _, r := range recs {
		status, sent, received := int64(r.Status), r.BytesSent, r.BytesReceived
		call := store.Extension{URL: "call", Extension: []store.Extension{
			{URL: "host", ValueCode: r.Host},
			{URL: "outcome", ValueCode: r.Outcome},
			{URL: "bytesSent", ValueInteger: &sent},
			{URL: "bytesReceived", ValueInteger: &received},
		}}
		if r.Status != 0 {
			call.Extension = append(call.Extension, store.Extension{URL: "status", ValueInteger: &status})
		}
		ext.Extension = append(ext.Extension, call)
	}
	ev.Extension = append(ev.Extension, ext)
}
