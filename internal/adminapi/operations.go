package adminapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/fhirstore"
	"go.uber.org/zap"
)

// deployRequest is the body of $deploy, exactly as Medplum's CLI sends it.
type deployRequest struct {
	Code     string `json:"code"`
	Filename string `json:"filename"`
}

func (h *Handler) serveDeploy(w http.ResponseWriter, r *http.Request, botID string) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, r, "POST")
		return
	}
	if h.o.Deploy == nil {
		h.fail(w, r, http.StatusNotImplemented, "bot deployment is not available in this build", nil)
		return
	}
	body, ok := h.readJSONBody(w, r)
	if !ok {
		return
	}
	var req deployRequest
	if err := json.Unmarshal(body, &req); err != nil {
		fhir.WriteOutcome(w, http.StatusBadRequest, describeJSONError(err))
		return
	}
	if strings.TrimSpace(req.Code) == "" {
		fhir.WriteOutcome(w, http.StatusBadRequest, "missing code: $deploy needs the bot's source in \"code\"", "code")
		return
	}
	if req.Filename == "" {
		req.Filename = "index.js" // Medplum's default
	}
	bot, err := h.o.Deploy(r.Context(), botID, req.Filename, req.Code)
	if err != nil {
		if ferr := fhir.AsError(err); ferr != nil {
			if ferr.Status >= 500 {
				h.fail(w, r, ferr.Status, ferr.Message, err)
				return
			}
			fhir.WriteError(w, ferr)
			return
		}
		h.writeStoreError(w, r, err)
		return
	}
	fhirstore.WriteResource(w, http.StatusOK, bot)
}

func (h *Handler) serveRotate(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, r, "POST")
		return
	}
	if h.o.RotateKeys == nil {
		h.fail(w, r, http.StatusNotImplemented, "key rotation is not available in this build", nil)
		return
	}
	kid, err := h.o.RotateKeys(r.Context())
	if err != nil {
		h.fail(w, r, http.StatusInternalServerError, fmt.Sprintf("rotating signing keys: %v", err), err)
		return
	}
	fhir.WriteJSON(w, http.StatusOK, fhir.NewOutcome(http.StatusOK, "new signing key "+kid))
}

func (h *Handler) serveBackup(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, r, "GET")
		return
	}
	if h.o.Backup == nil {
		h.fail(w, r, http.StatusNotImplemented, "backup is not available in this build", nil)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="fhirgate.backup"`)
	cw := &countingWriter{w: w}
	if err := h.o.Backup(cw); err != nil {
		if cw.n == 0 {
			w.Header().Del("Content-Disposition")
			h.fail(w, r, http.StatusInternalServerError, fmt.Sprintf("backing up the store: %v", err), err)
			return
		}
		h.o.Logger.Error("admin api backup stream cut", zap.Int64("bytes_sent", cw.n), zap.Error(err))
		// The status is already sent; cutting the connection is the only way
		// left to tell the client the stream is incomplete.
		panic(http.ErrAbortHandler)
	}
}

// countingWriter tells whether a streamed response has started.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (h *Handler) serveRestore(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, r, "POST")
		return
	}
	if h.o.Restore == nil {
		h.fail(w, r, http.StatusNotImplemented, "restore is not available in this build", nil)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/octet-stream" {
		fhir.WriteOutcome(w, http.StatusUnsupportedMediaType, "a restore body must be a backup stream sent as application/octet-stream")
		return
	}
	if err := h.o.Restore(r.Body); err != nil {
		fhir.WriteOutcome(w, http.StatusBadRequest, fmt.Sprintf("restoring backup: %v", err))
		return
	}
	fhir.WriteJSON(w, http.StatusOK, fhir.NewOutcome(http.StatusOK, "backup restored"))
}
