package fhir

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestNewOutcomeMatchesMedplumStatusMapping(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		wantID   string
		wantCode string
		severity string
	}{
		{"ok", 200, "ok", "informational", "information"},
		{"bad request has no id", 400, "", "invalid", "error"},
		{"unauthorized", 401, "unauthorized", "login", "error"},
		{"not found", 404, "not-found", "not-found", "error"},
		{"conflict", 409, "conflict", "conflict", "error"},
		{"unsupported media type", 415, "unsupported-media-type", "not-supported", "error"},
		{"too many requests", 429, "too-many-requests", "throttled", "error"},
		{"unknown 5xx is an exception", 599, "", "exception", "error"},
		{"unknown 4xx is processing", 418, "", "processing", "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOutcome(tt.status, "text")
			if o.ID != tt.wantID || o.Issue[0].Code != tt.wantCode || o.Issue[0].Severity != tt.severity {
				t.Fatalf("got id=%q code=%q severity=%q", o.ID, o.Issue[0].Code, o.Issue[0].Severity)
			}
		})
	}
}

func TestOutcomeStringJoinsLikeMedplum(t *testing.T) {
	o := NewOutcome(400, "Missing email", "externalId")
	o.Issue = append(o.Issue, Issue{Severity: "error", Code: "invalid", Details: &Text{Text: "Second"}, Diagnostics: "diag"})
	if got, want := o.String(), "Missing email (externalId); Second (diag)"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

func TestWriteOutcomeSetsFHIRContentType(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteOutcome(rec, http.StatusNotFound, "Bot/x not found")
	if rec.Code != 404 || rec.Header().Get("Content-Type") != ContentType {
		t.Fatalf("status %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	var o Outcome
	if err := json.Unmarshal(rec.Body.Bytes(), &o); err != nil {
		t.Fatal(err)
	}
	if o.ResourceType != "OperationOutcome" || o.Issue[0].Details.Text != "Bot/x not found" {
		t.Fatalf("unexpected body %s", rec.Body)
	}
}
