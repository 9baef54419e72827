package adminapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/storetest"
)

// TestAdminAPILogsServerErrors: every 5xx the admin API answers is logged
// with its cause (the handler returns nothing, so the log is the only place
// an operator sees it), 4xx answers are not, and no request body reaches
// the log.
func TestAdminAPILogsServerErrors(t *testing.T) {
	db := storetest.OpenKV(t)
	st := store.New(db, store.Options{})
	core, logs := observer.New(zap.DebugLevel)
	h := New(Options{
		Store:      st,
		Logger:     zap.New(core),
		RotateKeys: func(context.Context) (string, error) { return "", errors.New("key store unwritable") },
		Deploy: func(context.Context, string, string, string) (*store.Bot, error) {
			return nil, &fhir.Error{Status: http.StatusBadRequest, Message: "index.js:1:1: syntax"}
		},
	})
	serve := func(method, path, body string) int {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}

	if code := serve("POST", "/fhirgate/keys/rotate", ""); code != http.StatusInternalServerError {
		t.Fatalf("rotate: %d", code)
	}
	if code := serve("GET", "/fhirgate/backup", ""); code != http.StatusNotImplemented {
		t.Fatalf("backup: %d", code)
	}
	if code := serve("POST", "/fhirgate/Bot/b1/$deploy", `{"code":"secret-source"}`); code != http.StatusBadRequest {
		t.Fatalf("deploy: %d", code)
	}
	if code := serve("GET", "/fhirgate/Project/nope", ""); code != http.StatusNotFound {
		t.Fatalf("read: %d", code)
	}
	// A store that fails: its database is closed.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if code := serve("POST", "/fhirgate/Project", `{"resourceType":"Project","name":"secret-name"}`); code < 500 {
		t.Fatalf("create on a closed store: %d", code)
	}

	entries := logs.FilterMessage("admin api request failed").All()
	if len(entries) != 3 {
		t.Fatalf("%d failures logged, want 3 (rotate, backup, create): %v", len(entries), entries)
	}
	want := []struct {
		path   string
		status int64
		cause  string
	}{
		{"/fhirgate/keys/rotate", 500, "key store unwritable"},
		{"/fhirgate/backup", 501, ""},
		{"/fhirgate/Project", 0, "closed"},
	}
	for i, e := range entries {
		fields := e.ContextMap()
		if fields["path"] != want[i].path || (want[i].status != 0 && fields["status"] != want[i].status) {
			t.Errorf("entry %d: %v", i, fields)
		}
		cause, _ := fields["error"].(string)
		if !strings.Contains(strings.ToLower(cause), want[i].cause) {
			t.Errorf("entry %d: error %q, want it to say %q", i, cause, want[i].cause)
		}
	}
	for _, e := range logs.All() {
		for k, v := range e.ContextMap() {
			if s, ok := v.(string); ok && strings.Contains(s, "secret-") {
				t.Errorf("a request body reached the log in %s: %q", k, s)
			}
		}
	}
}
