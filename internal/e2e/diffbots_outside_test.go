package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The secrets the differential bots get, as Medplum's Project.secret
// settings: the outside service's URL and credentials, as production bots
// keep them.
const (
	diffWebhookSecret = "whsec-difftest-0123456789abcdef"
	diffAPIKey        = "api-key-difftest-fedcba9876543210"
)

// outsideService is the service outside the gateway that the differential
// bots call with fetch: a webhook receiver checking an HMAC-SHA256
// signature, an endpoint failing twice before it answers (for retries), a
// small drug lookup (for concurrent calls) and a scoring API behind a bearer
// key. It records the calls of each run under the run's name.
type outsideService struct {
	*httptest.Server

	mu       sync.Mutex
	run      string
	calls    map[string][]outsideCall
	attempts int // calls to /flaky in this run
}

// outsideCall is what the service saw of one call: never the headers
// themselves, only whether the signature or key was right.
type outsideCall struct {
	Call     string `json:"call"` // "POST /hooks/lab-result"
	Body     any    `json:"body,omitempty"`
	Verified *bool  `json:"verified,omitempty"` // signature or key, where the endpoint checks one
}

func newOutsideService(t *testing.T) *outsideService {
	o := &outsideService{calls: map[string][]outsideCall{}}
	o.Server = httptest.NewServer(http.HandlerFunc(o.serve))
	t.Cleanup(o.Close)
	return o
}

// begin records what follows under name and restarts the retry counter.
func (o *outsideService) begin(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.run, o.attempts = name, 0
}

// recorded returns the calls of the run of that name, sorted: concurrent
// calls arrive in any order.
func (o *outsideService) recorded(name string) []outsideCall {
	o.mu.Lock()
	defer o.mu.Unlock()
	calls := slices.Clone(o.calls[name])
	slices.SortStableFunc(calls, func(a, b outsideCall) int { return strings.Compare(a.Call, b.Call) })
	return calls
}

var diffDrugs = map[string]string{
	"197361": "Amlodipine 5 MG Oral Tablet",
	"310965": "Ibuprofen 200 MG Oral Tablet",
	"860975": "Metformin 500 MG Oral Tablet",
}

func (o *outsideService) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	call := outsideCall{Call: r.Method + " " + r.URL.RequestURI()}
	if len(raw) > 0 {
		var body any
		if json.Unmarshal(raw, &body) != nil {
			body = string(raw)
		}
		call.Body = body
	}
	o.mu.Lock()
	o.calls[o.run] = append(o.calls[o.run], call)
	last := &o.calls[o.run][len(o.calls[o.run])-1]
	if r.URL.Path == "/flaky" {
		o.attempts++
	}
	attempts := o.attempts
	o.mu.Unlock()
	verified := func(ok bool) {
		o.mu.Lock()
		last.Verified = &ok
		o.mu.Unlock()
	}

	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/hooks/lab-result":
		mac := hmac.New(sha256.New, []byte(diffWebhookSecret))
		mac.Write(raw)
		want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
		ok := hmac.Equal([]byte(r.Header.Get("X-Signature")), []byte(want))
		verified(ok)
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"bad signature"}`))
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"accepted":true}`))
	case r.URL.Path == "/flaky":
		if attempts < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"try again"}`))
			return
		}
		_, _ = w.Write([]byte(`{"status":"ok","attempt":` + strconv.Itoa(attempts) + `}`))
	case strings.HasPrefix(r.URL.Path, "/rxnorm/"):
		code := strings.TrimPrefix(r.URL.Path, "/rxnorm/")
		name, ok := diffDrugs[code]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"unknown code"}`))
			return
		}
		time.Sleep(50 * time.Millisecond) // long enough for concurrent calls to overlap
		_ = json.NewEncoder(w).Encode(map[string]string{"rxcui": code, "name": name})
	case r.URL.Path == "/score":
		ok := r.Header.Get("Authorization") == "Bearer "+diffAPIKey
		verified(ok)
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"unauthorized"}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"patient": r.URL.Query().Get("patient"), "risk": 0.42, "band": "moderate"})
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"not found"}`))
	}
}
