package gateway

import (
	"bytes"
	"net/http"
	"strings"
)

// partitionWriter maps a partitioned backend's URLs back to fhirgate's:
// {fhir_base}/{project} becomes {fhir_base} in the Location,
// Content-Location and Link headers and in textual bodies (FHIR JSON and
// XML: Bundle links, fullUrls, references the backend made absolute), so
// clients never see, or follow, the partition. A match counts only where
// the project id ends (the next byte is not an id character), so project
// "a" never rewrites "a1".
//
// Bodies are rewritten as they stream: the last len(from) bytes are held
// back until the next write (or finish) shows whether they start a match.
type partitionWriter struct {
	w        http.ResponseWriter
	from, to []byte
	// body is decided at WriteHeader: rewrite textual, uncompressed bodies.
	body        bool
	wroteHeader bool
	pending     []byte
}

func newPartitionWriter(w http.ResponseWriter, base, project string) *partitionWriter {
	return &partitionWriter{w: w, from: []byte(base + "/" + project), to: []byte(base)}
}

// Header implements http.ResponseWriter.
func (p *partitionWriter) Header() http.Header { return p.w.Header() }

// WriteHeader implements http.ResponseWriter.
func (p *partitionWriter) WriteHeader(status int) {
	if p.wroteHeader {
		return
	}
	h := p.w.Header()
	for _, name := range []string{"Location", "Content-Location", "Link"} {
		if vs := h.Values(name); len(vs) > 0 {
			out := make([]string, len(vs))
			for i, v := range vs {
				out[i] = string(p.replace([]byte(v)))
			}
			h[http.CanonicalHeaderKey(name)] = out
		}
	}
	if status >= 200 { // 1xx answers are interim: the final one follows
		p.wroteHeader = true
		enc := h.Get("Content-Encoding")
		p.body = status != http.StatusNoContent && status != http.StatusNotModified &&
			textual(h.Get("Content-Type")) && (enc == "" || strings.EqualFold(enc, "identity"))
		if p.body {
			h.Del("Content-Length") // the body changes length
		}
	}
	p.w.WriteHeader(status)
}

// Write implements http.ResponseWriter.
func (p *partitionWriter) Write(b []byte) (int, error) {
	if !p.wroteHeader {
		p.WriteHeader(http.StatusOK)
	}
	if !p.body {
		return p.w.Write(b)
	}
	buf := append(p.pending, b...)
	// A match may start in the last len(from) bytes and needs the byte
	// after it: hold those back.
	keep := min(len(buf), len(p.from))
	out, rest := p.replaceUpTo(buf, len(buf)-keep)
	p.pending = append(p.pending[:0:0], rest...)
	if _, err := p.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Flush sends what is safe to send; a held-back tail waits for the rest.
func (p *partitionWriter) Flush() {
	if f, ok := p.w.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (p *partitionWriter) Unwrap() http.ResponseWriter { return p.w }

// finish writes the held-back tail; the body ends there.
func (p *partitionWriter) finish() {
	if len(p.pending) > 0 {
		_, _ = p.w.Write(p.replace(p.pending))
		p.pending = nil
	}
}

// replaceUpTo rewrites the matches in buf that start before limit and
// returns the bytes up to the end of the last one or limit, whichever is
// later, and the rest.
func (p *partitionWriter) replaceUpTo(buf []byte, limit int) (out, rest []byte) {
	var res []byte
	done := 0
	for done < limit {
		i := bytes.Index(buf[done:], p.from)
		if i < 0 || done+i >= limit {
			break
		}
		start, end := done+i, done+i+len(p.from)
		if end < len(buf) && idByte(buf[end]) {
			res = append(res, buf[done:start+1]...)
			done = start + 1
			continue
		}
		res = append(res, buf[done:start]...)
		res = append(res, p.to...)
		done = end
	}
	if done < limit {
		res = append(res, buf[done:limit]...)
		done = limit
	}
	return res, buf[done:]
}

// replace rewrites every match in b, taking its end as the end of the text.
func (p *partitionWriter) replace(b []byte) []byte {
	out, _ := p.replaceUpTo(b, len(b))
	return out
}

// idByte tells whether c may continue a FHIR id.
func idByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.'
}

// textual tells whether a body of this media type carries URLs as text.
func textual(contentType string) bool {
	ct := strings.ToLower(contentType)
	return strings.Contains(ct, "json") || strings.Contains(ct, "xml") || strings.HasPrefix(ct, "text/")
}
