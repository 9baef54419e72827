package gateway

import (
	"net/url"
	"testing"
)

func TestNormalizePathDefeatsTricks(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"/fhir/R4/Patient/1", "/fhir/r4/patient/1"},
		{"/x/../fhir/R4/Patient", "/fhir/r4/patient"},
		{"//fhir//R4/Patient", "/fhir/r4/patient"},
		{"/fhir/./R4/Patient", "/fhir/r4/patient"},
		{"/fhir;jsessionid=1/R4;x/Patient", "/fhir/r4/patient"},
		{"/fhir%2FR4%2FPatient", "/fhir/r4/patient"},
		{"/%66hir/R4/Patient", "/fhir/r4/patient"},
		{"/x/%2e%2e/fhir/R4", "/fhir/r4"},
		{"/x/%252e%252e/fhir/R4", "/fhir/r4"},
		{`/x\..\fhir\R4`, "/fhir/r4"},
		{"/FHIR/R4/Patient", "/fhir/r4/patient"},
		{"", "/"},
		{"/fhir/R4/Bot/..%2f..%2fadmin", "/fhir/admin"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := normalizePath(tt.in); got != tt.want {
				t.Fatalf("normalizePath(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestUnder(t *testing.T) {
	tests := []struct {
		p, base string
		want    bool
	}{
		{"/fhir/r4", "/fhir/r4", true},
		{"/fhir/r4/patient", "/fhir/r4", true},
		{"/fhir/r45", "/fhir/r4", false},
		{"/fhir", "/fhir/r4", false},
	}
	for _, tt := range tests {
		if got := under(tt.p, tt.base); got != tt.want {
			t.Errorf("under(%q, %q) = %v", tt.p, tt.base, got)
		}
	}
}

func TestPathViewsKeepEscapedReading(t *testing.T) {
	u, err := url.Parse("http://gw/fhir/R4/Bot/..%2f..%2fadmin")
	if err != nil {
		t.Fatal(err)
	}
	v := pathViews(u)
	if v != [4]string{"/fhir/r4/bot/..%2f..%2fadmin", "/fhir/r4/bot/../../admin", "/fhir/r4/bot/..%2f..%2fadmin", "/fhir/admin"} {
		t.Fatalf("views %q", v)
	}
}
