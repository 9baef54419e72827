package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

func TestEmailBlock(t *testing.T) {
	v, err := parseGlobalOption(caddyfile.NewTestDispenser(`fhirgate {
	email {
		smtp smtp.example.com:587
		username bots
		password s3cret
		from "Bots <bots@example.com>"
		tls opportunistic
		timeout 5s
		rate_limit 10 30m
	}
	project p1 {
		email_senders alerts@example.com ops@example.com
	}
}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	var app App
	if err := json.Unmarshal(v.(httpcaddyfile.App).Value, &app); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(app.Email)
	want := `{"smtp":"smtp.example.com:587","username":"bots","password":"s3cret","from":"Bots \u003cbots@example.com\u003e","tls":"opportunistic","timeout":5000000000,"rate_limit":10,"rate_period":1800000000000}`
	if string(got) != want {
		t.Errorf("email = %s\nwant %s", got, want)
	}
	if s := strings.Join(app.Projects["p1"].EmailSenders, ","); s != "alerts@example.com,ops@example.com" {
		t.Errorf("email_senders = %s", s)
	}
	if sender, err := app.emailSender(); err != nil || sender == nil {
		t.Errorf("emailSender: %v, %v", sender, err)
	}
}

func TestEmailBlockErrorsNameTheLine(t *testing.T) {
	for _, tt := range []struct{ input, want string }{
		{"fhirgate {\n\temail {\n\t\tfrom a@example.com\n\t}\n}", "smtp <host:port> is required, at Testfile:4"},
		{"fhirgate {\n\temail {\n\t\tsmtp nohost\n\t}\n}", "smtp must be host:port"},
		{"fhirgate {\n\temail {\n\t\tsmtp h:25\n\t\ttls sometimes\n\t}\n}", "tls must be mandatory, opportunistic, implicit or off"},
		{"fhirgate {\n\temail {\n\t\tsmtp h:25\n\t\tusername u\n\t}\n}", "username and password go together"},
		{"fhirgate {\n\temail {\n\t\tsmtp h:25\n\t\trate_limit 0\n\t}\n}", "invalid rate_limit '0': must be a positive integer, at Testfile:4"},
		{"fhirgate {\n\temail {\n\t\tsmtp h:25\n\t\trate_limit 5 soon\n\t}\n}", "invalid rate_limit period 'soon'"},
		{"fhirgate {\n\temail {\n\t\tsmtp h:25\n\t\tport 25\n\t}\n}", "unrecognized email option 'port', at Testfile:4"},
		{"fhirgate {\n\temail {\n\t\tsmtp h:25\n\t}\n\temail {\n\t\tsmtp h:25\n\t}\n}", "email already specified, at Testfile:5"},
	} {
		_, err := parseGlobalOption(caddyfile.NewTestDispenser(tt.input), nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want it to contain %q", tt.input, err, tt.want)
		}
	}
}
