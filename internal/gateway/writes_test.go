package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// recordingHook watches every write and records what it was shown.
type recordingHook struct {
	writes []*Write
	done   []*BackendResponse
	// sentBefore says whether the client had any of the answer when Done ran.
	sentBefore []bool
	rec        *httptest.ResponseRecorder
}

func (h *recordingHook) Watch(_ context.Context, w *Write) WriteWatch {
	h.writes = append(h.writes, w)
	return h
}

func (h *recordingHook) Done(_ context.Context, resp *BackendResponse, _ bool) {
	h.done = append(h.done, &BackendResponse{Status: resp.Status, Header: resp.Header.Clone(), Body: append([]byte(nil), resp.Body...)})
	h.sentBefore = append(h.sentBefore, h.rec.Body.Len() > 0 || h.rec.Code != http.StatusOK)
}

func TestWritesAreShownToTheHookBeforeTheClientGetsTheAnswer(t *testing.T) {
	hook := &recordingHook{}
	f := newFixture(t, Options{Writes: hook})
	serve := func(method, path, body string, status int) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+f.token)
		rec := httptest.NewRecorder()
		hook.rec = rec
		err := f.gw.Serve(rec, req, func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Location", "/fhir/R4/Patient/p1/_history/1")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"resourceType":"Patient","id":"p1"}`))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	rec := serve("POST", "/fhir/R4/Patient", `{"resourceType":"Patient"}`, 201)
	if rec.Code != 201 || rec.Body.String() != `{"resourceType":"Patient","id":"p1"}` || len(hook.done) != 1 || hook.sentBefore[0] {
		t.Fatalf("answer %d %s, done %d, sent before %v", rec.Code, rec.Body, len(hook.done), hook.sentBefore)
	}
	if w := hook.writes[0]; w.Method != "POST" || len(w.Segments) != 1 || w.Segments[0] != "Patient" || w.Identity.ProjectID != "p" || w.Backend == nil {
		t.Fatalf("write %+v", w)
	}
	if d := hook.done[0]; d.Status != 201 || d.Header.Get("Location") == "" || !strings.Contains(string(d.Body), "p1") {
		t.Fatalf("done %+v", d)
	}

	// A failed write is passed through, never shown as done.
	if rec := serve("PUT", "/fhir/R4/Patient/p1", `{}`, 412); rec.Code != 412 || len(hook.done) != 1 {
		t.Fatalf("failed write: %d, done %d", rec.Code, len(hook.done))
	}
	// A batch's body is handed over, and still reaches the backend.
	bundle := `{"resourceType":"Bundle","type":"batch","entry":[]}`
	serve("POST", "/fhir/R4", bundle, 200)
	if w := hook.writes[len(hook.writes)-1]; string(w.Body) != bundle {
		t.Fatalf("batch body %q", w.Body)
	}
	// Reads are not writes.
	n := len(hook.writes)
	serve("GET", "/fhir/R4/Patient/p1", "", 200)
	if len(hook.writes) != n {
		t.Fatal("a read was shown to the write hook")
	}
}
