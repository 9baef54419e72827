package adminapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/store"
)

// Prefix is the path under which the admin API is mounted.
const Prefix = "/fhirgate/"

// DefaultMaxBody bounds request bodies (records and bot sources) when
// Options.MaxBody is zero.
const DefaultMaxBody = 8 << 20

// access says what the generic CRUD routes may do with a resource type.
type access int

const (
	readOnly access = iota + 1
	readWrite
)

// resourceAccess lists the types the admin API exposes. Signing keys and
// logins are deliberately absent: they hold private keys and refresh
// secrets, and have dedicated operations instead.
var resourceAccess = map[string]access{
	"Project":           readWrite,
	"ClientApplication": readWrite,
	"User":              readWrite,
	"ProjectMembership": readWrite,
	"Bot":               readWrite,
	"Binary":            readOnly,
	"AuditEvent":        readOnly,
	"AsyncJob":          readOnly,
}

// DeployFunc compiles and stores a bot's code, returning the updated bot. An
// error that is or wraps a *fhir.Error is answered as that error.
type DeployFunc func(ctx context.Context, botID, filename, code string) (*store.Bot, error)

// Options configures a Handler. Store is required; the others enable their
// routes (an absent one answers 501).
type Options struct {
	Store      *store.Store
	Deploy     DeployFunc
	RotateKeys func(ctx context.Context) (kid string, err error)
	Backup     func(w io.Writer) error
	Restore    func(r io.Reader) error
	// MaxBody bounds request bodies in bytes. Zero means DefaultMaxBody.
	MaxBody int64
	// Logger receives every 5xx answer with its cause (never a body or a
	// header). Nil means no logging.
	Logger *zap.Logger
}

// Handler serves the admin API.
type Handler struct {
	o Options
}

// New returns an admin API handler.
func New(o Options) *Handler {
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return &Handler{o: o}
}

// ServeHTTP dispatches on the path below Prefix.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		fhir.WriteOutcome(w, http.StatusNotFound, "not an admin API path")
		return
	}
	parts := strings.Split(strings.TrimSuffix(rest, "/"), "/")
	switch {
	case len(parts) == 1 && parts[0] == "backup":
		h.serveBackup(w, r)
	case len(parts) == 1 && parts[0] == "restore":
		h.serveRestore(w, r)
	case len(parts) == 2 && parts[0] == "keys" && parts[1] == "rotate":
		h.serveRotate(w, r)
	case len(parts) == 3 && parts[0] == "Bot" && parts[2] == "$deploy":
		h.serveDeploy(w, r, parts[1])
	case len(parts) == 1 && parts[0] != "":
		h.serveType(w, r, parts[0])
	case len(parts) == 2 && parts[1] != "":
		h.serveInstance(w, r, parts[0], parts[1])
	default:
		fhir.WriteOutcome(w, http.StatusNotFound, fmt.Sprintf("no admin API route for %s", r.URL.Path))
	}
}

// fail answers status with an OperationOutcome saying text. A 5xx is
// logged with its cause: the handler answers and returns nothing, so this
// log line is how an operator learns why the admin API failed. Neither the
// request's body nor its headers are logged.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, text string, cause error, expression ...string) {
	if status >= 500 {
		h.o.Logger.Error("admin api request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path),
			zap.Int("status", status), zap.Error(cause))
	}
	fhir.WriteOutcome(w, status, text, expression...)
}

// typeAccess resolves a path segment to a resource type the API exposes, or
// writes a 404 and returns false.
func typeAccess(w http.ResponseWriter, typ string) (access, bool) {
	acc, ok := resourceAccess[typ]
	if !ok {
		fhir.WriteOutcome(w, http.StatusNotFound, fmt.Sprintf("unknown resource type %q; the admin API manages %s", typ, exposedTypes()))
	}
	return acc, ok
}

func (h *Handler) serveType(w http.ResponseWriter, r *http.Request, typ string) {
	acc, ok := typeAccess(w, typ)
	if !ok {
		return
	}
	switch {
	case r.Method == http.MethodGet:
		h.list(w, r, typ)
	case r.Method == http.MethodPost && acc == readWrite:
		h.create(w, r, typ)
	default:
		methodNotAllowed(w, r, allowedOnType(acc))
	}
}

func (h *Handler) serveInstance(w http.ResponseWriter, r *http.Request, typ, id string) {
	acc, ok := typeAccess(w, typ)
	if !ok {
		return
	}
	switch {
	case r.Method == http.MethodGet:
		h.read(w, r, typ, id)
	case r.Method == http.MethodPut && acc == readWrite:
		h.put(w, r, typ, id)
	case r.Method == http.MethodDelete:
		h.delete(w, r, typ, id)
	default:
		methodNotAllowed(w, r, allowedOnInstance(acc))
	}
}

func allowedOnType(acc access) string {
	if acc == readWrite {
		return "GET, POST"
	}
	return "GET"
}

func allowedOnInstance(acc access) string {
	if acc == readWrite {
		return "GET, PUT, DELETE"
	}
	return "GET, DELETE"
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	fhir.WriteOutcome(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed here; allowed: %s", r.Method, allow))
}

// readJSONBody checks the media type and reads a bounded body. On failure it
// has written the response and returns false.
func (h *Handler) readJSONBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if !isJSONMediaType(r.Header.Get("Content-Type")) {
		fhir.WriteOutcome(w, http.StatusUnsupportedMediaType,
			"request body must be JSON (Content-Type application/json or application/fhir+json)")
		return nil, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, h.o.MaxBody+1))
	if err != nil {
		fhir.WriteOutcome(w, http.StatusBadRequest, fmt.Sprintf("reading request body: %v", err))
		return nil, false
	}
	if int64(len(body)) > h.o.MaxBody {
		fhir.WriteOutcome(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", h.o.MaxBody))
		return nil, false
	}
	return body, true
}

func isJSONMediaType(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || mt == "application/fhir+json"
}

// decodeResource parses a body into a new resource of typ, checking that the
// body's resourceType (if any) agrees with the path.
func decodeResource(typ string, body []byte) (store.Resource, error) {
	res, err := store.NewResource(typ)
	if err != nil {
		return nil, err
	}
	if sd, ok := res.(store.StrictDecoder); ok {
		// Its JSON form is not its fields' (a Bot's settings are
		// extensions): it refuses unknown elements itself.
		if err := sd.DecodeStrict(body); err != nil {
			var verr *store.ValidationError
			if errors.As(err, &verr) {
				return nil, verr
			}
			return nil, &store.ValidationError{Field: "body", Message: describeJSONError(err)}
		}
	} else {
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(res); err != nil {
			return nil, &store.ValidationError{Field: "body", Message: describeJSONError(err)}
		}
		if dec.More() {
			return nil, &store.ValidationError{Field: "body", Message: "unexpected data after the JSON object"}
		}
	}
	if got := res.Base().ResourceType; got != "" && got != typ {
		return nil, &store.ValidationError{Field: "resourceType", Message: fmt.Sprintf("is %q but the path says %q", got, typ)}
	}
	res.Base().ResourceType = typ
	return res, nil
}

func describeJSONError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d: %v", syn.Offset, err)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q must be %s, not %s", typ.Field, typ.Type, typ.Value)
	case errors.Is(err, io.EOF):
		return "empty body; expected a JSON object"
	default:
		return err.Error()
	}
}

func exposedTypes() string {
	return "Project, ClientApplication, User, ProjectMembership, Bot (read-write) and Binary, AuditEvent, AsyncJob (read-only)"
}
