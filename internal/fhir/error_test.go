package fhir

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestWriteError(t *testing.T) {
	tests := []struct {
		name  string
		err   *Error
		retry string
		expr  []any
	}{
		{"plain", NewError(http.StatusNotFound, "Bot/x not found"), "", nil},
		{"expression", &Error{Status: http.StatusBadRequest, Message: "missing resourceType", Expression: "resourceType"}, "", []any{"resourceType"}},
		{"retry rounds up", &Error{Status: http.StatusTooManyRequests, Message: "busy", RetryAfter: 1500 * time.Millisecond}, "2", nil},
		{"whole seconds", &Error{Status: http.StatusTooManyRequests, Message: "busy", RetryAfter: time.Second}, "1", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Wrapped, as the packages that return it do.
			e := AsError(fmt.Errorf("context: %w", tt.err))
			if e != tt.err {
				t.Fatal("AsError lost the error")
			}
			w := httptest.NewRecorder()
			WriteError(w, e)
			if w.Code != tt.err.Status || w.Header().Get("Retry-After") != tt.retry || w.Header().Get("Content-Type") != ContentType {
				t.Fatalf("status %d, Retry-After %q, Content-Type %q", w.Code, w.Header().Get("Retry-After"), w.Header().Get("Content-Type"))
			}
			var out struct {
				ResourceType string
				Issue        []struct {
					Details    struct{ Text string }
					Expression []any
				}
			}
			if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.ResourceType != "OperationOutcome" || len(out.Issue) != 1 {
				t.Fatalf("body %s", w.Body)
			}
			if is := out.Issue[0]; is.Details.Text != tt.err.Message || fmt.Sprint(is.Expression) != fmt.Sprint(tt.expr) {
				t.Fatalf("issue %+v", is)
			}
		})
	}
	if AsError(fmt.Errorf("plain")) != nil {
		t.Fatal("AsError found an Error in a plain error")
	}
}
