package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Tenancy modes: how a shared backend tells the projects apart.
const (
	// TenantNone (default): every project reaches the same backend paths;
	// the backend sees the project only in the identity headers.
	TenantNone = "none"
	// TenantPath: {fhir_base}/X goes to the backend as
	// {fhir_base}/{project}/X (HAPI FHIR's URL-based partitioning).
	TenantPath = "path"
	// TenantHeader: the project id goes to the backend in a header.
	TenantHeader = "header"
)

// errNoPartition refuses a path that cannot be confined to a partition.
var errNoPartition = errors.New("the request path cannot be confined to the project's partition")

// checkTenancy validates the tenancy options, filling the default mode.
func checkTenancy(o *Options) error {
	switch o.BackendTenant {
	case "":
		o.BackendTenant = TenantNone
	case TenantNone, TenantPath:
	case TenantHeader:
		if o.TenantHeader == "" || !httpguts.ValidHeaderFieldName(o.TenantHeader) {
			return fmt.Errorf("backend_tenant header needs a header name, got %q", o.TenantHeader)
		}
		return nil
	default:
		return fmt.Errorf("backend_tenant %q: must be none, path or header", o.BackendTenant)
	}
	if o.TenantHeader != "" {
		return fmt.Errorf("tenant_header %q is only used with backend_tenant header", o.TenantHeader)
	}
	return nil
}

// toTenant prepares an authenticated request for the backend in project's
// tenancy: with TenantHeader it sets the header (clients' copies were
// stripped with the identity headers); with TenantPath it rewrites the path
// into the project's partition, built from the gate's one reading of it, t,
// and returns a writer that maps the partition out of the response's URLs.
// finish must be called once the response is written.
func (g *Gateway) toTenant(w http.ResponseWriter, r *http.Request, t Target, project string) (out http.ResponseWriter, finish func(), err error) {
	switch g.o.BackendTenant {
	case TenantHeader:
		r.Header.Set(g.o.TenantHeader, project)
		return w, func() {}, nil
	case TenantPath:
	default:
		return w, func() {}, nil
	}
	if !t.Under {
		// Some reading of the path is under the base (the gate checked),
		// but not the canonical one: a lenient backend could take it as an
		// unpartitioned path.
		return nil, nil, errNoPartition
	}
	escaped, err := partitionPath(t.Base, project, t.Segments)
	if err != nil {
		return nil, nil, err
	}
	unescaped, err := url.PathUnescape(escaped)
	if err != nil {
		return nil, nil, errNoPartition
	}
	u := *r.URL
	u.Opaque, u.Path, u.RawPath = "", unescaped, escaped
	r.URL = &u
	r.RequestURI = u.RequestURI()
	// The response's URLs are rewritten below, which needs a body the
	// backend did not compress.
	r.Header.Del("Accept-Encoding")
	pw := newPartitionWriter(w, t.Base, project)
	return pw, pw.finish, nil
}

// partitionPath returns the escaped backend path of segments (decoded,
// below base) in project's partition: base/project, then each segment
// escaped. A project id or segment that a backend could read as anything
// but one plain segment is refused: dot segments, and after decoding a
// slash, backslash, ';' (servlet path parameters), '%' (a second decoding)
// or any byte outside printable ASCII. FHIR's types, ids and operation
// names never contain these.
func partitionPath(base, project string, segments []string) (string, error) {
	if !plainSegment(project) {
		return "", errNoPartition
	}
	var b strings.Builder
	b.WriteString(base)
	b.WriteByte('/')
	b.WriteString(url.PathEscape(project))
	for _, s := range segments {
		if !plainSegment(s) {
			return "", errNoPartition
		}
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String(), nil
}

// plainSegment tells whether a decoded segment is one segment to every
// backend reading.
func plainSegment(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c <= 0x20 || c >= 0x7f, c == '/', c == '\\', c == ';', c == '%':
			return false
		}
	}
	return true
}
