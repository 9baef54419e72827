package hl7

import (
	"testing"
	"time"
)

func TestParseDateTime(t *testing.T) {
	tests := []struct {
		in   string
		loc  *time.Location
		want string // RFC 3339 in UTC with milliseconds, or "" for an error
	}{
		{"2023", nil, "2023-01-01T00:00:00.000Z"},
		{"202305", nil, "2023-05-01T00:00:00.000Z"},
		{"20230508", nil, "2023-05-08T00:00:00.000Z"},
		{"2023050810", nil, "2023-05-08T10:00:00.000Z"},
		{"202305081030", nil, "2023-05-08T10:30:00.000Z"},
		{"20230508103004", nil, "2023-05-08T10:30:04.000Z"},
		{"20230508103004.123", nil, "2023-05-08T10:30:04.123Z"}, // Medplum's test
		{"20230508103004.1", nil, "2023-05-08T10:30:04.100Z"},   // Medplum: .001
		{"20230508103004.1234", nil, "2023-05-08T10:30:04.123Z"},
		{"20230508103004-0200", nil, "2023-05-08T12:30:04.000Z"}, // Medplum's test
		{"20230508103004+0530", nil, "2023-05-08T05:00:04.000Z"},
		{"20230508103004.5-05:00", nil, "2023-05-08T15:30:04.500Z"},
		{"202305081030+01", nil, "2023-05-08T09:30:00.000Z"},
		{"20230508103004", time.FixedZone("", -5*3600), "2023-05-08T15:30:04.000Z"},
		{"20230508103004+0000", time.FixedZone("", -5*3600), "2023-05-08T10:30:04.000Z"},
		{"20240229", nil, "2024-02-29T00:00:00.000Z"},
		{"", nil, ""},
		{"202", nil, ""},
		{"20230", nil, ""},
		{"2023-05-08", nil, ""},
		{"20230230", nil, ""},
		{"20231301", nil, ""},
		{"2023050824", nil, ""},
		{"20230508103060", nil, ""},
		{"202305081030.5", nil, ""},
		{"20230508103004.", nil, ""},
		{"20230508103004.12345", nil, ""},
		{"20230508103004+2400", nil, ""},
		{"20230508103004+0", nil, ""},
		{"2023050810300x", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDateTime(tt.in, tt.loc)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("ParseDateTime(%q) = %v, want an error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := got.UTC().Format("2006-01-02T15:04:05.000Z"); s != tt.want {
				t.Errorf("ParseDateTime(%q) = %s, want %s", tt.in, s, tt.want)
			}
		})
	}
}

func TestFormatDateTime(t *testing.T) {
	tests := []struct {
		name string
		t    time.Time
		want string
	}{
		{"whole seconds", time.Date(2023, 5, 8, 10, 30, 4, 0, time.UTC), "20230508103004"},
		{"converted to UTC", time.Date(2023, 5, 8, 10, 30, 4, 0, time.FixedZone("", -2*3600)), "20230508123004"},
		{"milliseconds", time.Date(2023, 5, 8, 10, 30, 4, 123e6, time.UTC), "20230508103004.123"},
		{"zero-padded milliseconds", time.Date(2023, 5, 8, 10, 30, 4, 5e6, time.UTC), "20230508103004.005"},
		{"sub-millisecond dropped", time.Date(2023, 5, 8, 10, 30, 4, 999, time.UTC), "20230508103004"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FormatDateTime(tt.t)
			if got != tt.want {
				t.Errorf("FormatDateTime = %q, want %q", got, tt.want)
			}
			back, err := ParseDateTime(got, nil)
			if err != nil || !back.Equal(tt.t.Truncate(time.Millisecond)) {
				t.Errorf("ParseDateTime(%q) = %v, %v", got, back, err)
			}
		})
	}
}
