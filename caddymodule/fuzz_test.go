package caddymodule

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

// parseDeadline bounds one parse: the parsers walk a few hundred tokens at
// most, so anything near this is a hang.
const parseDeadline = 5 * time.Second

// FuzzCaddyfile feeds arbitrary Caddyfile text to the global option parser
// (alone, and merged into its own earlier result, as two fhirgate blocks
// are) and to the handler directive's UnmarshalCaddyfile. Neither may panic
// or hang; what the global option accepts must be JSON that decodes back
// into an App, and an accepted handler must survive a JSON round trip.
// Input the Caddyfile lexer itself refuses is skipped: caddyfile's
// NewTestDispenser would log.Fatal on it, so the fuzzer tokenizes the way it
// does and builds the dispenser from the tokens. Seeds:
// testdata/fuzz/FuzzCaddyfile and below.
func FuzzCaddyfile(f *testing.F) {
	for _, s := range []string{
		"fhirgate {\n\tstorage_dir ./data\n\tissuer http://localhost\n\taccess_token_ttl 1h\n\tbot_max_concurrent 4\n}",
		"fhirgate {\n\tproject alpha {\n\t\tname Alpha\n\t\tclient app {\n\t\t\tuserinfo_url https://idp/userinfo\n\t\t\tuse_subject\n\t\t\tsecret {env.S}\n\t\t\tcache_ttl -1s\n\t\t}\n\t\tuser a@b.c {\n\t\t\tprofile Practitioner/1\n\t\t\tadmin\n\t\t}\n\t\tbot echo {\n\t\t\tidentifier https://x|echo https://y|e2\n\t\t\tsource ./echo.ts\n\t\t}\n\t}\n}",
		"fhirgate {\n\tfhir_base /fhir/R4\n\tpublic_paths /metadata /x/*\n\tupstream_auth bearer {env.T}\n\tmax_body 1MB\n\tidentity_headers {\n\t\tuser X-U\n\t}\n}",
		"fhirgate {\n\tpublic_paths\n\tupstream_auth strip\n}",
		"fhirgate {\n\tstorage postgres {\n\t\tdsn {env.FHIRGATE_POSTGRES_DSN}\n\t\tmax_conns 8\n\t\ttimeout 5s\n\t}\n}",
		"fhirgate {\n\tstorage badger {\n\t\tdir ./data\n\t}\n\tstorage_dir ./x\n}",
		"fhirgate {\n\tstorage {\n\t}\n}",
		"fhirgate {\n\tproject a {\n\t\tproject b {\n\t\t}\n\t}\n}",
		"fhirgate {\n\tproject a\n\tproject a\n}",
		"fhirgate {\n\tmax_body 0\n}",
		"fhirgate {\n\tmax_body 99999999999999999999TB\n}",
		"fhirgate {\n\taccess_token_ttl 9999999999999999h\n}",
		"fhirgate {\n\tidentity_headers {\n\t\t{\n\t\t}\n\t}\n}",
		"fhirgate {\n\tproject {\n\t}\n}",
		"fhirgate extra",
		"fhirgate",
		"fhirgate {\n}\nfhirgate {\n}",
		"fhirgate {\n\tbot_timeout `10s`\n\tissuer <<EOF\n\thttp://x\n\tEOF\n}",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		tokens, err := caddyfile.Tokenize([]byte(input), "Testfile")
		if err != nil {
			return
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			checkGlobalOption(t, tokens)
			checkHandler(t, tokens)
		}()
		select {
		case <-done:
		case <-time.After(parseDeadline):
			t.Fatalf("parsing did not finish within %v: %q", parseDeadline, input)
		}
	})
}

func checkGlobalOption(t *testing.T, tokens []caddyfile.Token) {
	v, err := parseGlobalOption(caddyfile.NewDispenser(tokens), nil)
	if err != nil {
		return
	}
	app := decodeApp(t, v)
	// A second block with the same text merges into the first: it may be
	// refused (a repeated project, a repeated duration), never crash.
	v2, err := parseGlobalOption(caddyfile.NewDispenser(tokens), v)
	if err != nil {
		return
	}
	merged := decodeApp(t, v2)
	for id := range app.Projects {
		if _, ok := merged.Projects[id]; !ok {
			t.Errorf("merging lost project %q", id)
		}
	}
}

func decodeApp(t *testing.T, v any) *App {
	ha, ok := v.(httpcaddyfile.App)
	if !ok || ha.Name != "fhirgate" {
		t.Errorf("global option returned %#v", v)
		return new(App)
	}
	app := new(App)
	if err := json.Unmarshal(ha.Value, app); err != nil {
		t.Errorf("global option JSON does not decode: %v\n%s", err, ha.Value)
	}
	return app
}

func checkHandler(t *testing.T, tokens []caddyfile.Token) {
	h := new(Handler)
	if err := h.UnmarshalCaddyfile(caddyfile.NewDispenser(tokens)); err != nil {
		return
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Errorf("encoding the handler: %v", err)
		return
	}
	back := new(Handler)
	if err := json.Unmarshal(b, back); err != nil {
		t.Errorf("handler JSON does not decode: %v\n%s", err, b)
		return
	}
	if !reflect.DeepEqual(h, back) {
		t.Errorf("handler JSON round trip changed it:\n%+v\n%+v", h, back)
	}
}

// TestEmptyPublicPathsSurvivesAdapt: "public_paths" with no arguments means
// nothing is public; the empty list must survive the trip through JSON
// rather than fall back to the default public paths (FuzzCaddyfile's JSON
// round trip found that it did not).
func TestEmptyPublicPathsSurvivesAdapt(t *testing.T) {
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte("http://localhost:8080 {\n\tfhirgate {\n\t\tpublic_paths\n\t}\n\trespond ok\n}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"public_paths":[]`) {
		t.Fatalf("adapted handler lost the empty public_paths: %s", out)
	}
}
