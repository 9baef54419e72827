package caddymodule

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

func TestGlobalOptionErrorsNameTheLine(t *testing.T) {
	tests := []struct {
		name, input, want string
	}{
		{"unknown option", "fhirgate {\n\tstorage_dri /x\n}", "unrecognized fhirgate option 'storage_dri', at Testfile:2"},
		{"argument on the option", "fhirgate extra {\n}", "wrong argument count"},
		{"duplicate storage_dir", "fhirgate {\n\tstorage_dir /a\n\tstorage_dir /b\n}", "storage_dir already specified, at Testfile:3"},
		{"storage_dir without value", "fhirgate {\n\tstorage_dir\n}", "wrong argument count"},
		{"bad duration", "fhirgate {\n\taccess_token_ttl soon\n}", "invalid access_token_ttl 'soon'"},
		{"negative ttl", "fhirgate {\n\taccess_token_ttl -1h\n}", "must be positive"},
		{"duplicate project", "fhirgate {\n\tproject a\n\tproject a\n}", "project 'a' already declared, at Testfile:3"},
		{"unknown project option", "fhirgate {\n\tproject a {\n\t\tcolour blue\n\t}\n}", "unrecognized project option 'colour', at Testfile:3"},
		{"unknown client option", "fhirgate {\n\tproject a {\n\t\tclient c {\n\t\t\tuserinfo https://x\n\t\t}\n\t}\n}", "unrecognized client option 'userinfo', at Testfile:4"},
		{"use_subject takes no value", "fhirgate {\n\tproject a {\n\t\tclient c {\n\t\t\tuse_subject yes\n\t\t}\n\t}\n}", "wrong argument count"},
		{"duplicate user", "fhirgate {\n\tproject a {\n\t\tuser x@y.z\n\t\tuser x@y.z\n\t}\n}", "user 'x@y.z' already declared"},
		{"unknown user option", "fhirgate {\n\tproject a {\n\t\tuser x@y.z {\n\t\t\trole admin\n\t\t}\n\t}\n}", "unrecognized user option 'role'"},
		{"identifier without value", "fhirgate {\n\tproject a {\n\t\tbot b {\n\t\t\tidentifier\n\t\t}\n\t}\n}", "wrong argument count"},
		{"unknown bot option", "fhirgate {\n\tproject a {\n\t\tbot b {\n\t\t\tscript x.js\n\t\t}\n\t}\n}", "unrecognized bot option 'script', at Testfile:4"},
		{"bad audit_event_trigger", "fhirgate {\n\tproject a {\n\t\tbot b {\n\t\t\taudit_event_trigger sometimes\n\t\t}\n\t}\n}", "invalid audit_event_trigger 'sometimes': want one of always, never, on-error, on-output, at Testfile:4"},
		{"bad bot_isolation", "fhirgate {\n\tbot_isolation thread\n}", "invalid bot_isolation 'thread': want process or inprocess, at Testfile:2"},
		{"bot_isolation without value", "fhirgate {\n\tbot_isolation\n}", "wrong argument count"},
		{"storage without a name", "fhirgate {\n\tstorage\n}", "wrong argument count"},
		{"unknown storage", "fhirgate {\n\tstorage redis\n}", "unknown storage 'redis': want badger or postgres, at Testfile:2"},
		{"duplicate storage", "fhirgate {\n\tstorage badger\n\tstorage badger\n}", "storage already specified, at Testfile:3"},
		{"storage_dir after storage", "fhirgate {\n\tstorage badger\n\tstorage_dir /x\n}", "storage and storage_dir both set"},
		{"postgres without dsn", "fhirgate {\n\tstorage postgres {\n\t\tmax_conns 4\n\t}\n}", "storage postgres needs a dsn"},
		{"postgres dsn twice", "fhirgate {\n\tstorage postgres {\n\t\tdsn a\n\t\tdsn b\n\t}\n}", "dsn already specified, at Testfile:4"},
		{"postgres bad timeout", "fhirgate {\n\tstorage postgres {\n\t\tdsn a\n\t\ttimeout -1s\n\t}\n}", "invalid timeout '-1s': must be positive, at Testfile:4"},
		{"unknown postgres option", "fhirgate {\n\tstorage postgres {\n\t\tpassword x\n\t}\n}", "unrecognized storage postgres option 'password', at Testfile:3"},
		{"unknown badger option", "fhirgate {\n\tstorage badger {\n\t\tpath /x\n\t}\n}", "unrecognized storage badger option 'path', at Testfile:3"},
		{"bot scope without value", "fhirgate {\n\tproject a {\n\t\tbot b {\n\t\t\tscope\n\t\t}\n\t}\n}", "wrong argument count"},
		{"bot scope twice", "fhirgate {\n\tproject a {\n\t\tbot b {\n\t\t\tscope user/Patient.rs\n\t\t\tscope user/Observation.rs\n\t\t}\n\t}\n}", "scope already specified, at Testfile:5"},
		{"bot scope without resource scope", "fhirgate {\n\tproject a {\n\t\tbot b {\n\t\t\tscope openid\n\t\t}\n\t}\n}", "which would be the project's full access; leave scope out for that, at Testfile:4"},
		{"bot cron twice", "fhirgate {\n\tproject a {\n\t\tbot b {\n\t\t\tcron 0 3 * * *\n\t\t\tcron 0 4 * * *\n\t\t}\n\t}\n}", "cron already specified, at Testfile:5"},
		{"bot cron descriptor", "fhirgate {\n\tproject a {\n\t\tbot b {\n\t\t\tcron @daily\n\t\t}\n\t}\n}", "invalid cron: \"@daily\" is not a five-field cron expression"},
		{"bot run_as_user twice", "fhirgate {\n\tproject a {\n\t\tbot b {\n\t\t\trun_as_user\n\t\t\trun_as_user false\n\t\t}\n\t}\n}", "run_as_user already specified, at Testfile:5"},
		{"bot run_as_user two values", "fhirgate {\n\tproject a {\n\t\tbot b {\n\t\t\trun_as_user true false\n\t\t}\n\t}\n}", "wrong argument count"},
		{"audit_event_trigger without value", "fhirgate {\n\tproject a {\n\t\tbot b {\n\t\t\taudit_event_trigger\n\t\t}\n\t}\n}", "wrong argument count"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseGlobalOption(caddyfile.NewTestDispenser(tt.input), nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestHandlerDirectiveErrorsNameTheLine(t *testing.T) {
	tests := []struct {
		name, input, want string
	}{
		{"unknown subdirective", "fhirgate {\n\tfhir_bsae /x\n}", "unrecognized fhirgate subdirective 'fhir_bsae', at Testfile:2"},
		{"bad upstream_auth", "fhirgate {\n\tupstream_auth maybe\n}", "invalid upstream_auth 'maybe'"},
		{"bearer without token", "fhirgate {\n\tupstream_auth bearer\n}", "wrong argument count"},
		{"strip with token", "fhirgate {\n\tupstream_auth strip tok\n}", "wrong argument count"},
		{"duplicate fhir_base", "fhirgate {\n\tfhir_base /a\n\tfhir_base /b\n}", "fhir_base already specified, at Testfile:3"},
		{"relative fhir_base", "fhirgate {\n\tfhir_base fhir\n}", "must start with /"},
		{"unknown identity header", "fhirgate {\n\tidentity_headers {\n\t\temail X-Email\n\t}\n}", "unrecognized identity header 'email'"},
		{"public_methods without value", "fhirgate {\n\tpublic_methods\n}", "wrong argument count"},
		{"duplicate public_methods", "fhirgate {\n\tpublic_methods GET\n\tpublic_methods POST\n}", "public_methods already specified, at Testfile:3"},
		{"public_upstream_auth takes no value", "fhirgate {\n\tpublic_upstream_auth yes\n}", "wrong argument count"},
		{"duplicate public_upstream_auth", "fhirgate {\n\tpublic_upstream_auth\n\tpublic_upstream_auth\n}", "public_upstream_auth already specified, at Testfile:3"},
		{"bad subscription_durability", "fhirgate {\n\tsubscription_durability fsync\n}", `invalid subscription_durability "fsync": must be deferred or sync, at Testfile:2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := new(Handler)
			err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.input))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestSubscriptionDurabilityParses: the values are kept as written.
func TestSubscriptionDurabilityParses(t *testing.T) {
	for _, v := range []string{"deferred", "sync"} {
		h := new(Handler)
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("fhirgate {\n\tsubscription_durability " + v + "\n}")); err != nil || h.SubscriptionDurability != v {
			t.Fatalf("%s: %q, %v", v, h.SubscriptionDurability, err)
		}
	}
}

// TestAdaptGolden adapts each testdata/adapt/*.caddyfiletest: a Caddyfile,
// a line of dashes, then the expected JSON, or a substring of the expected
// error when that part is not JSON (Caddy's own convention).
func TestAdaptGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/adapt/*.caddyfiletest")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	adapter := caddyconfig.GetAdapter("caddyfile")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			input, expected, ok := strings.Cut(string(raw), "\n----------\n")
			if !ok {
				t.Fatal("missing ---------- separator")
			}
			expected = strings.TrimSpace(expected)
			out, _, err := adapter.Adapt([]byte(input), map[string]any{"filename": "/etc/caddy/Caddyfile"})
			if !json.Valid([]byte(expected)) {
				if err == nil || !strings.Contains(err.Error(), expected) {
					t.Fatalf("error %v, want it to contain %q", err, expected)
				}
				return
			}
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			var got, want any
			_ = json.Unmarshal(out, &got)
			_ = json.Unmarshal([]byte(expected), &want)
			gotJSON, _ := json.MarshalIndent(got, "", "\t")
			wantJSON, _ := json.MarshalIndent(want, "", "\t")
			if string(gotJSON) != string(wantJSON) {
				t.Fatalf("adapted JSON differs.\ngot:\n%s\nwant:\n%s", gotJSON, wantJSON)
			}
		})
	}
}
