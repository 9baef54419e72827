package procmaps

import "testing"

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		line string
		want Mapping
		ok   bool
	}{
		{"file, padded, with a space in the path", "7f0000001000-7f0000003000 r--s 00000000 08:01 1234                       /var/lib/fhir gate/000001.sst\n",
			Mapping{0x7f0000001000, 0x7f0000003000, "/var/lib/fhir gate/000001.sst"}, true},
		{"deleted file", "7f10-7f20 r--s 00000000 08:01 15 /x/000009.sst (deleted)", Mapping{0x7f10, 0x7f20, "/x/000009.sst"}, true},
		{"anonymous", "7f40-7f50 rw-p 00000000 00:00 0", Mapping{0x7f40, 0x7f50, ""}, true},
		{"anonymous, trailing space", "7f40-7f50 rw-p 00000000 00:00 0 ", Mapping{0x7f40, 0x7f50, ""}, true},
		{"pseudo-path", "7f40-7f50 rw-p 00000000 00:00 0                          [heap]", Mapping{0x7f40, 0x7f50, "[heap]"}, true},
		{"smaps size line", "Rss:                1024 kB", Mapping{}, false},
		{"smaps flags line", "VmFlags: rd sh mr mw me ms sd", Mapping{}, false},
		{"bad range", "7f50-7f40 r--s 00000000 08:01 15 /x/000001.sst", Mapping{}, false},
		{"not hex", "zz-7f40 r--s 00000000 08:01 15 /x/000001.sst", Mapping{}, false},
		{"empty", "", Mapping{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Parse(tt.line)
			if got != tt.want || ok != tt.ok {
				t.Errorf("Parse = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
