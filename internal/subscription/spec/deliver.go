package spec

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/textproto"
)

// Sign is the X-Signature of body under secret, as Medplum computes it:
// hex(HMAC-SHA256(secret, body)).
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Body is what a delivery carries: to a URL the resource, or "{}" on a
// delete; to a bot the resource, or {"deletedResource": …} on a delete.
func Body(toBot bool, interaction string, resource json.RawMessage) []byte {
	if interaction != Delete {
		return resource
	}
	if !toBot {
		return []byte("{}")
	}
	out, _ := json.Marshal(map[string]json.RawMessage{"deletedResource": resource})
	return out
}

// Headers are a rest-hook delivery's headers (Medplum's): the content
// type, X-Medplum-Subscription, X-Medplum-Interaction,
// X-Medplum-Deleted-Resource on a delete, the channel's literals, the
// signature over body when the rule has a secret, and traceparent.
func (r *Rule) Headers(interaction, ref string, body []byte, traceparent string) http.Header {
	// Sized for what it holds, and its values one array: a map grown
	// entry by entry, and a slice per value (Header.Set), were most of a
	// bot delivery's headers' garbage. Setting a name again replaces its
	// value, as Set does.
	n := 3 + len(r.ChannelHeaders)
	for _, more := range []bool{interaction == Delete, r.Secret != "", traceparent != ""} {
		if more {
			n++
		}
	}
	h := headerBuilder{h: make(http.Header, n), values: make([]string, 0, n)}
	h.set("Content-Type", "application/fhir+json")
	h.set("X-Medplum-Subscription", r.ID)
	h.set("X-Medplum-Interaction", interaction)
	if interaction == Delete {
		h.set("X-Medplum-Deleted-Resource", ref)
	}
	for _, kv := range r.ChannelHeaders {
		h.set(textproto.CanonicalMIMEHeaderKey(kv[0]), kv[1])
	}
	if r.Secret != "" {
		h.set("X-Signature", Sign(r.Secret, body))
	}
	if traceparent != "" {
		h.set("Traceparent", traceparent)
	}
	return h.h
}

// headerBuilder sets header values (canonical names) from one array.
type headerBuilder struct {
	h      http.Header
	values []string
}

func (b *headerBuilder) set(name, value string) {
	b.values = append(b.values, value)
	n := len(b.values)
	b.h[name] = b.values[n-1 : n : n]
}
