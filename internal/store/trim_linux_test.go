package store

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestStoreFileMapping(t *testing.T) {
	t.Parallel()
	const prefix = "/var/lib/fhir gate/"
	tests := []struct {
		name       string
		line       string
		start, end uintptr
		ok         bool
	}{
		{"table", "7f0000001000-7f0000003000 r--s 00000000 08:01 1234                       /var/lib/fhir gate/000001.sst", 0x7f0000001000, 0x7f0000003000, true},
		{"value log", "7f10-7f20 rw-s 00000000 08:01 15 /var/lib/fhir gate/000001.vlog", 0x7f10, 0x7f20, true},
		{"deleted table", "7f10-7f20 r--s 00000000 08:01 15 /var/lib/fhir gate/000009.sst (deleted)", 0x7f10, 0x7f20, true},
		{"memtable log", "7f10-7f20 rw-s 00000000 08:01 15 /var/lib/fhir gate/00001.mem", 0, 0, false},
		{"sibling directory", "7f10-7f20 r--s 00000000 08:01 15 /var/lib/fhir gate2/000001.sst", 0, 0, false},
		{"binary", "00400000-00c00000 r-xp 00000000 08:01 12 /usr/bin/caddy", 0, 0, false},
		{"anonymous", "7f40-7f50 rw-p 00000000 00:00 0", 0, 0, false},
		{"bad range", "7f50-7f40 r--s 00000000 08:01 15 /var/lib/fhir gate/000001.sst", 0, 0, false},
		{"not hex", "zz-7f40 r--s 00000000 08:01 15 /var/lib/fhir gate/000001.sst", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start, end, ok := storeFileMapping(tt.line, prefix)
			if start != tt.start || end != tt.end || ok != tt.ok {
				t.Errorf("storeFileMapping = %#x, %#x, %v; want %#x, %#x, %v", start, end, ok, tt.start, tt.end, tt.ok)
			}
		})
	}
}

// TestPageOutStoreFiles checks the premise and the effect: tables Badger has
// just written are resident in this process, a pass hands them back, and
// everything still reads afterwards.
func TestPageOutStoreFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	kv, err := OpenBadger(BadgerOptions{Dir: dir, TrimInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	s := New(kv, Options{})
	var logins []*Login
	for len(tableFiles(t, dir)) == 0 {
		batch := make([]Resource, 100)
		for i := range batch {
			l := &Login{User: Reference{Reference: "User/u" + strconv.Itoa(len(logins))}, Scope: strings.Repeat("openid ", 40)}
			logins = append(logins, l)
			batch[i] = l
		}
		if err := s.CreateAll(ctx, batch, PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if len(logins) > 200_000 {
			t.Fatal("no table written after 200,000 records")
		}
	}
	// Tables are written before they are added to the tree.
	time.Sleep(100 * time.Millisecond)
	before := residentStoreKiB(t, dir)
	if before < 512 {
		t.Fatalf("%d KiB of tables resident after writing %d records; the premise (Badger leaves written tables resident) no longer holds", before, len(logins))
	}
	n, err := pageOutStoreFiles(dir)
	if err != nil || n == 0 {
		t.Fatalf("pageOutStoreFiles = %d, %v", n, err)
	}
	after := residentStoreKiB(t, dir)
	t.Logf("%d tables: %d KiB resident before the pass, %d KiB after", len(tableFiles(t, dir)), before, after)
	if after > before/10 {
		t.Errorf("resident table memory %d KiB -> %d KiB; want it (nearly) all handed back", before, after)
	}
	for _, want := range logins {
		got, err := Get[Login](ctx, s, want.ID)
		if err != nil || got.UserID() != want.UserID() {
			t.Fatalf("Login %s after paging out: %+v, %v", want.ID, got, err)
		}
	}
}

func TestTrimLoopRunsUntilClose(t *testing.T) {
	t.Parallel()
	kv, err := OpenBadger(BadgerOptions{Dir: t.TempDir(), TrimInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); kv.trimPasses.Load() < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d trim passes in 10 s at a 5 ms interval", kv.trimPasses.Load())
		}
	}
	if err := kv.Close(); err != nil {
		t.Fatal(err)
	}
	passes := kv.trimPasses.Load()
	time.Sleep(30 * time.Millisecond)
	if n := kv.trimPasses.Load(); n != passes {
		t.Fatalf("%d trim passes after Close", n-passes)
	}
	off, err := OpenBadger(BadgerOptions{Dir: t.TempDir(), TrimInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	if off.trimEvery != 0 {
		t.Errorf("a negative TrimInterval left trimming on (every %v)", off.trimEvery)
	}
}

func tableFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// residentStoreKiB sums the resident KiB of this process's mappings of the
// table files in dir, from /proc/self/smaps.
func residentStoreKiB(t *testing.T, dir string) int {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	total, inDir := 0, false
	for line := range strings.Lines(string(smaps)) {
		if _, _, ok := storeFileMapping(strings.TrimSuffix(line, "\n"), dir+"/"); ok {
			inDir = true
			continue
		}
		f := strings.Fields(line)
		if len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			inDir = false // another mapping's header
			continue
		}
		if inDir && len(f) == 3 && f[0] == "Rss:" {
			kb, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("parsing %q: %v", line, err)
			}
			total += kb
		}
	}
	return total
}
