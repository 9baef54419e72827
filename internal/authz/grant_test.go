package authz

import (
	"errors"
	"testing"
)

func TestGrant(t *testing.T) {
	cases := []struct {
		name, requested, allowed, want string
		err                            bool
	}{
		{"no allowed keeps request", "openid offline", "", "openid offline", false},
		{"no allowed keeps resource scopes", "openid user/Observation.rs", "", "openid user/Observation.rs", false},
		{"allowed with only openid is full", "user/*.cruds", "openid", "user/*.cruds", false},
		{"within as written", "patient/Observation.read", "patient/*.rs", "patient/Observation.read", false},
		{"narrowed to intersection", "user/*.cruds", "user/Observation.rs user/Patient.r", "user/Observation.rs user/Patient.r", false},
		{"no resource scope requested gets allowed", "openid offline", "user/Observation.rs", "openid offline user/Observation.rs", false},
		{"patient inside user", "patient/Observation.rs", "user/*.read", "patient/Observation.rs", false},
		{"user narrowed to patient", "user/Observation.rs", "patient/*.cruds", "patient/Observation.rs", false},
		{"system not inside user", "system/Observation.rs", "user/*.cruds", "", true},
		{"granular kept", "user/Observation.rs?category=laboratory", "user/Observation.rs", "user/Observation.rs?category=laboratory", false},
		{"granular added by allowed", "user/Observation.rs", "user/Observation.s?category=laboratory", "user/Observation.s?category=laboratory", false},
		{"perms anded", "user/Observation.cruds", "user/Observation.read", "user/Observation.rs", false},
		{"nothing grantable", "user/Patient.rs", "user/Observation.rs", "", true},
		{"bad perms order", "user/Observation.sr", "", "", true},
		{"bad type", "user/observation.rs", "", "", true},
		{"empty perms", "user/Observation.", "", "", true},
		{"bad char", "open\"id", "", "", true},
		{"bad allowed", "openid", "patient/Foo.x", "", true},
		{"unknown dropped", "openid something user/Observation.r", "", "openid user/Observation.r", false},
		{"non-resource filtered by allowed", "openid offline_access user/Observation.r", "openid user/*.r", "openid user/Observation.r", false},
		{"covered duplicate dropped", "user/*.cruds user/Observation.r", "user/Observation.rs", "user/Observation.rs", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Grant(c.requested, c.allowed)
			if c.err {
				if !errors.Is(err, ErrInvalidScope) {
					t.Fatalf("Grant(%q, %q) = %q, %v; want ErrInvalidScope", c.requested, c.allowed, got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Grant(%q, %q) = %q, %v; want %q", c.requested, c.allowed, got, err, c.want)
			}
		})
	}
}

func TestParseV1V2(t *testing.T) {
	cases := map[string]string{
		"patient/Observation.read": "patient/Observation.rs",
		"user/*.write":             "user/*.cud",
		"system/Patient.*":         "system/Patient.cruds",
		"user/Observation.cs":      "user/Observation.cs",
		"user/Observation.rs?code=http://loinc.org|1234-5&category=laboratory": "user/Observation.rs?category=laboratory&code=http://loinc.org|1234-5",
	}
	for in, want := range cases {
		set, err := Parse(in)
		if err != nil || len(set.Scopes) != 1 || set.Scopes[0].String() != want {
			t.Errorf("Parse(%q) = %+v, %v; want %s", in, set, err, want)
		}
	}
}
