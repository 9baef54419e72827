package procmaps

import (
	"maps"
	"testing"
)

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

func TestResidentKiB(t *testing.T) {
	t.Parallel()
	smaps := "" +
		"00400000-00c00000 r-xp 00000000 08:01 12 /opt/caddy\nSize:  8192 kB\nRss:  8192 kB\nPss:  4096 kB\n" +
		"7f00-7f10 r--s 00000000 08:01 13 /s/000001.sst\nRss:  1024 kB\nVmFlags: rd sh mr mw me ms sd\n" +
		"7f10-7f20 r--s 00000000 08:01 13 /s/000001.sst (deleted)\nRss:  512 kB\n" +
		"7f20-7f30 rw-p 00000000 00:00 0 \nRss:  64 kB\n" +
		"7f30-7f40 rw-p 00000000 00:00 0\nRss:  32 kB\n"
	got, err := ResidentKiB(smaps)
	want := map[string]int64{"/opt/caddy": 8192, "/s/000001.sst": 1536, "": 96}
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("ResidentKiB = %v, %v; want %v", got, err, want)
	}
	if _, err := ResidentKiB("7f00-7f10 r--s 00000000 08:01 13 /s/1.sst\nRss:  lots kB\n"); err == nil {
		t.Error("ResidentKiB accepted an Rss line without a number")
	}
}
