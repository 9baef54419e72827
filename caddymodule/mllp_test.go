package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestMLLPCaddyfileErrorsNameTheLine(t *testing.T) {
	tests := []struct {
		name, input, want string
	}{
		{"argument on the handler", "fhirgate_mllp extra {\n}", "wrong argument count"},
		{"duplicate project", "fhirgate_mllp {\n\tproject a\n\tproject b\n}", "project already specified, at Testfile:3"},
		{"bot without value", "fhirgate_mllp {\n\tbot\n}", "wrong argument count"},
		{"route without bot", "fhirgate_mllp {\n\troute {\n\t\tsending_application LAB\n\t}\n}", "a fhirgate_mllp route needs a bot, at Testfile:4"},
		{"unknown route option", "fhirgate_mllp {\n\troute {\n\t\tmessage_type ADT\n\t}\n}", "unrecognized fhirgate_mllp route option 'message_type', at Testfile:3"},
		{"bad size", "fhirgate_mllp {\n\tmax_message huge\n}", "invalid max_message 'huge'"},
		{"size over the bound", "fhirgate_mllp {\n\tmax_message 1GiB\n}", "at most 64 MiB"},
		{"bad duplicate_window", "fhirgate_mllp {\n\tduplicate_window never\n}", "invalid duplicate_window 'never'"},
		{"zero max_concurrent", "fhirgate_mllp {\n\tmax_concurrent 0\n}", "must be a positive integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := new(MLLP).UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.input))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestMLLPValidate(t *testing.T) {
	tests := []struct {
		name string
		h    MLLP
		want string
	}{
		{"no project", MLLP{Bot: "b"}, "project is required"},
		{"no bot, no routes", MLLP{Project: "p"}, "bot is required"},
		{"route without bot", MLLP{Project: "p", Routes: []MLLPRoute{{SendingApplication: "LAB"}}}, "route 1: bot is required"},
		{"oversized bound", MLLP{Project: "p", Bot: "b", MaxMessage: 65<<20 + 1}, "max_message"},
		{"routes alone are enough", MLLP{Project: "p", Routes: []MLLPRoute{{Bot: "b"}}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.h.Validate()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}
