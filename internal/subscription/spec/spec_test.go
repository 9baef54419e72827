package spec

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/internal/store"
)

func TestParseCriteria(t *testing.T) {
	for _, tc := range []struct {
		in, typ, query, err string
	}{
		{in: "Patient", typ: "Patient"},
		{in: "Observation?code=1234-5&status=final", typ: "Observation", query: "code=1234-5&status=final"},
		{in: "Patinet", err: "FHIR R4 resource type"},
		{in: "Patient?_id=1", err: "_id"},
		{in: "Patient?a=%zz", err: "do not parse"},
		{in: "", err: "resource type"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			c, err := ParseCriteria(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || c.Type != tc.typ || c.Query != tc.query {
				t.Fatalf("%+v %v", c, err)
			}
		})
	}
	c, _ := ParseCriteria("Patient?family=Doe")
	if q := c.MatchQuery("p1"); q.Get("_id") != "p1" || q.Get("family") != "Doe" || q.Get("_summary") != "count" {
		t.Fatalf("match query %v", q)
	}
}

func TestSignIsHexHMACSHA256OfTheBody(t *testing.T) {
	body := []byte(`{"resourceType":"Patient","id":"1"}`)
	m := hmac.New(sha256.New, []byte("abc"))
	m.Write(body)
	if got, want := Sign("abc", body), hex.EncodeToString(m.Sum(nil)); got != want {
		t.Fatalf("%s, want %s", got, want)
	}
	if Sign("abc", body) == Sign("abd", body) {
		t.Fatal("the key does not change the signature")
	}
}

func TestSplitHeaderAtTheFirstColon(t *testing.T) {
	name, value, err := SplitHeader(" Authorization : Bearer a:b:c ")
	if err != nil || name != "Authorization" || value != "Bearer a:b:c" {
		t.Fatalf("%q %q %v", name, value, err)
	}
	for _, bad := range []string{"no colon", ": value", "Bad Name: x", "X: a\r\nInjected: b"} {
		if _, _, err := SplitHeader(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func sub(criteria, endpoint string, exts ...store.SubscriptionExtension) *store.Subscription {
	s := &store.Subscription{Status: "active", Criteria: criteria, Extension: exts,
		Channel: store.SubscriptionChannel{Type: "rest-hook", Endpoint: endpoint, Header: []string{"X-Key: 1:2"}}}
	s.ID = "s1"
	return s
}

func TestCompileReadsMedplumsExtensionsAndRefusesTheRest(t *testing.T) {
	three := int64(5)
	r, err := Compile(sub("Patient", "https://hook.example/x",
		store.SubscriptionExtension{URL: ExtSupportedInteraction, ValueCode: "delete"},
		store.SubscriptionExtension{URL: ExtMaxAttempts, ValueInteger: &three},
		store.SubscriptionExtension{URL: ExtSuccessCodes, ValueString: "200, 410-499"},
		store.SubscriptionExtension{URL: ExtSecret, ValueString: "s3cret"}))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Triggers(Delete) || r.Triggers(Create) || r.MaxAttempts != 5 || r.Secret != "s3cret" {
		t.Fatalf("%+v", r)
	}
	if !r.Succeeded(200) || r.Succeeded(201) || !r.Succeeded(451) {
		t.Fatal("success codes")
	}
	if d, _ := Compile(sub("Patient", "Bot/b1")); !d.Triggers(Create) || !d.Triggers(Update) || d.Triggers(Delete) || d.Endpoint.Bot != "b1" || !d.Succeeded(302) || d.Succeeded(404) {
		t.Fatalf("defaults %+v", d)
	}
	h := r.Headers(Delete, "Patient/1", []byte("{}"), "00-abc-def-01")
	if h.Get("X-Medplum-Deleted-Resource") != "Patient/1" || h.Get("X-Key") != "1:2" || h.Get("X-Signature") != Sign("s3cret", []byte("{}")) ||
		h.Get("X-Medplum-Subscription") != "s1" || h.Get("traceparent") != "00-abc-def-01" {
		t.Fatalf("headers %v", h)
	}
	for _, tc := range []struct {
		name  string
		s     *store.Subscription
		field string
	}{
		{"websocket", func() *store.Subscription { s := sub("Patient", "Bot/b"); s.Channel.Type = "websocket"; return s }(), "channel.type"},
		{"fhirpath", sub("Patient", "Bot/b", store.SubscriptionExtension{URL: ExtFHIRPathCriteria, ValueString: "true"}), "extension[0]"},
		{"unknown extension", sub("Patient", "Bot/b", store.SubscriptionExtension{URL: "https://x.example/ext"}), "extension[0].url"},
		{"bad endpoint", sub("Patient", "ftp://x"), "channel.endpoint"},
		{"credentials in URL", sub("Patient", "https://u:p@x.example"), "channel.endpoint"},
		{"bad interaction", sub("Patient", "Bot/b", store.SubscriptionExtension{URL: ExtSupportedInteraction, ValueCode: "read"}), "extension[0].valueCode"},
		{"bad success codes", sub("Patient", "Bot/b", store.SubscriptionExtension{URL: ExtSuccessCodes, ValueString: "2xx"}), "extension[0].valueString"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(tc.s)
			se, ok := err.(*Error)
			if !ok || se.Field != tc.field {
				t.Fatalf("err %v, want field %s", err, tc.field)
			}
		})
	}
}

func TestChangesFromTheBackendsAnswer(t *testing.T) {
	loc := http.Header{"Location": {"http://fhir.example/fhir/R4/Patient/p1/_history/7"}}
	// return=minimal: ids from Location only.
	c := Changes(Request{Method: "POST", Segments: []string{"Patient"}}, Response{Status: 201, Header: loc}, nil)
	if len(c) != 1 || c[0].Interaction != Create || c[0].ID != "p1" || c[0].Version != "7" || c[0].Resource != nil {
		t.Fatalf("%+v", c)
	}
	body := []byte(`{"resourceType":"Patient","id":"p1","meta":{"versionId":"8"}}`)
	c = Changes(Request{Method: "PUT", Segments: []string{"Patient"}}, Response{Status: 200, Header: http.Header{}, Body: body}, nil)
	if len(c) != 1 || c[0].Interaction != Update || c[0].Version != "8" || string(c[0].Resource) != string(body) {
		t.Fatalf("conditional update %+v", c)
	}
	if c := Changes(Request{Method: "POST", Segments: []string{"Patient"}}, Response{Status: 200, Header: loc}, nil); c != nil {
		t.Fatalf("a conditional create that found the resource: %+v", c)
	}
	if c := Changes(Request{Method: "POST", Segments: []string{"Patient"}}, Response{Status: 412, Header: loc}, nil); c != nil {
		t.Fatalf("a failed write: %+v", c)
	}
	last := []byte(`{"resourceType":"Patient","id":"p1"}`)
	c = Changes(Request{Method: "DELETE", Segments: []string{"Patient", "p1"}}, Response{Status: 204, Header: http.Header{}}, Deleted{"Patient/p1": last})
	if len(c) != 1 || c[0].Interaction != Delete || string(c[0].Resource) != string(last) {
		t.Fatalf("delete %+v", c)
	}
	tx := []byte(`{"resourceType":"Bundle","type":"transaction","entry":[
		{"request":{"method":"POST","url":"Patient"}},
		{"request":{"method":"PUT","url":"Observation/o1"}},
		{"request":{"method":"DELETE","url":"Patient/p9"}},
		{"request":{"method":"POST","url":"Patient"}}]}`)
	resp := []byte(`{"resourceType":"Bundle","type":"transaction-response","entry":[
		{"response":{"status":"201 Created","location":"Patient/a/_history/1"}},
		{"response":{"status":"200 OK","location":"Observation/o1/_history/2"}},
		{"response":{"status":"204 No Content"}},
		{"response":{"status":"400 Bad Request"}}]}`)
	c = Changes(Request{Method: "POST", Body: tx}, Response{Status: 200, Header: http.Header{}, Body: resp}, Deleted{})
	if len(c) != 3 || c[0].Ref() != "Patient/a" || c[0].Interaction != Create || c[1].Interaction != Update || c[1].Version != "2" ||
		c[2].Interaction != Delete || c[2].Ref() != "Patient/p9" {
		t.Fatalf("transaction %+v", c)
	}
	if d := BundleDeletes(tx); len(d) != 1 || d[0] != "Patient/p9" {
		t.Fatalf("bundle deletes %v", d)
	}
	if !IsWrite("POST", nil) || IsWrite("POST", []string{"Patient", "_search"}) || IsWrite("POST", []string{"Bot", "b", "$execute"}) || !IsWrite("PATCH", []string{"Patient", "1"}) {
		t.Fatal("IsWrite")
	}
}

// TestHeadersAreWhatSetMakes checks Rule.Headers, which builds the map
// directly, against the same headers set one by one with Header.Set: a
// channel header that names a standard one (in any case) replaces it,
// and a delete's, a secret's and a trace's are there.
func TestHeadersAreWhatSetMakes(t *testing.T) {
	for _, interaction := range []string{Create, Delete} {
		for _, secret := range []string{"", "s3cret"} {
			for _, trace := range []string{"", "00-abc-def-01"} {
				r := &Rule{ID: "s1", Secret: secret, ChannelHeaders: [][2]string{{"x-key", "1:2"}, {"content-type", "text/plain"}, {"X-KEY", "3"}}}
				body := []byte(`{"a":1}`)
				want := http.Header{}
				want.Set("Content-Type", "application/fhir+json")
				want.Set("X-Medplum-Subscription", r.ID)
				want.Set("X-Medplum-Interaction", interaction)
				if interaction == Delete {
					want.Set("X-Medplum-Deleted-Resource", "Patient/1")
				}
				for _, kv := range r.ChannelHeaders {
					want.Set(kv[0], kv[1])
				}
				if secret != "" {
					want.Set("X-Signature", Sign(secret, body))
				}
				if trace != "" {
					want.Set("traceparent", trace)
				}
				if got := r.Headers(interaction, "Patient/1", body, trace); !reflect.DeepEqual(got, want) {
					t.Fatalf("%s %q %q:\n got %v\nwant %v", interaction, secret, trace, got, want)
				}
			}
		}
	}
}
