package oauth

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/fhir"
)

// Deprecation signals for /auth/exchange. Medplum's own client stopped
// calling it in @medplum/core 2.0.15 (2023-04-18); it is removed after the
// sunset date.
const (
	legacyDeprecation = "@1681776000" // RFC 9745 structured date: 2023-04-18
	legacySunset      = "Thu, 31 Dec 2026 23:59:59 GMT"
)

// legacyRequest is Medplum's /auth/exchange body.
type legacyRequest struct {
	ClientID            string `json:"clientId"`
	ExternalAccessToken string `json:"externalAccessToken"`
	Scope               string `json:"scope"`
}

// ServeLegacyExchange is Medplum's deprecated POST /auth/exchange: the same
// exchange as /oauth2/token with a JSON or form body {clientId,
// externalAccessToken}. Every answer says it is deprecated (RFC 9745
// Deprecation, RFC 8594 Sunset, and a Link to the successor), and each use
// is logged with the client so operators can find who still calls it.
func (s *Server) ServeLegacyExchange(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Deprecation", legacyDeprecation)
	h.Set("Sunset", legacySunset)
	h.Set("Link", `</oauth2/token>; rel="successor-version"`)
	if r.Method != http.MethodPost {
		h.Set("Allow", "POST")
		fhir.WriteOutcome(w, http.StatusMethodNotAllowed, "/auth/exchange accepts POST only")
		return
	}
	req, ok := readLegacyBody(w, r)
	if !ok {
		return
	}
	// Medplum's validator reports every missing field, in this order, as
	// one OperationOutcome.
	var issues []fhir.Issue
	if req.ExternalAccessToken == "" {
		issues = append(issues, missingField("externalAccessToken"))
	}
	if req.ClientID == "" {
		issues = append(issues, missingField("clientId"))
	}
	if len(issues) > 0 {
		fhir.WriteJSON(w, http.StatusBadRequest, &fhir.Outcome{ResourceType: "OperationOutcome", ID: uuid.NewString(), Issue: issues})
		return
	}
	s.o.Logger.Warn("deprecated /auth/exchange used; switch the client to /oauth2/token",
		zap.String("client_id", req.ClientID), zap.String("remote_ip", r.RemoteAddr))

	resp, client, e := s.Exchange(r.Context(), ExchangeRequest{
		ClientID: req.ClientID, SubjectToken: req.ExternalAccessToken, Scope: req.Scope,
		RemoteAddr: r.RemoteAddr, UserAgent: r.UserAgent(),
	})
	clientID := ""
	if client != nil {
		clientID = client.ID
	}
	if e != nil {
		s.o.OnToken("legacy_exchange", clientID, e.Code)
		writeError(w, e)
		return
	}
	s.o.OnToken("legacy_exchange", clientID, "ok")
	writeJSON(w, http.StatusOK, resp)
}

func missingField(name string) fhir.Issue {
	return fhir.Issue{Severity: "error", Code: "invalid", Details: &fhir.Text{Text: "Missing " + name}, Expression: []string{name}}
}

// readLegacyBody accepts JSON or a form, as Medplum's body parsers do.
func readLegacyBody(w http.ResponseWriter, r *http.Request) (legacyRequest, bool) {
	var req legacyRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, maxFormBytes+1))
	if err != nil || len(body) > maxFormBytes {
		fhir.WriteOutcome(w, http.StatusRequestEntityTooLarge, "the request body is too large or unreadable")
		return req, false
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		if len(body) > 0 {
			if err := json.Unmarshal(body, &req); err != nil {
				fhir.WriteOutcome(w, http.StatusBadRequest, "Content could not be parsed")
				return req, false
			}
		}
	case "application/x-www-form-urlencoded":
		values, err := url.ParseQuery(string(body))
		if err != nil {
			fhir.WriteOutcome(w, http.StatusBadRequest, "Content could not be parsed")
			return req, false
		}
		req = legacyRequest{ClientID: values.Get("clientId"), ExternalAccessToken: values.Get("externalAccessToken"), Scope: values.Get("scope")}
	case "":
		// No body: every field is missing, which validation reports.
	default:
		fhir.WriteOutcome(w, http.StatusUnsupportedMediaType, "send JSON or a form")
		return req, false
	}
	return req, true
}
