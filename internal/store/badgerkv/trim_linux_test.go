package badgerkv

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/procmaps"

	"github.com/fhirgate/fhirgate/internal/store"
)

func TestStoreFileMapping(t *testing.T) {
	t.Parallel()
	const prefix = "/var/lib/fhir gate/"
	tests := []struct {
		name string
		line string
		want storeMapping
		ok   bool
	}{
		{"table", "7f0000001000-7f0000003000 r--s 00000000 08:01 1234                       /var/lib/fhir gate/000001.sst",
			storeMapping{0x7f0000001000, 0x7f0000003000, prefix + "000001.sst", true}, true},
		{"value log", "7f10-7f20 rw-s 00000000 08:01 15 /var/lib/fhir gate/000001.vlog", storeMapping{0x7f10, 0x7f20, prefix + "000001.vlog", false}, true},
		{"deleted table", "7f10-7f20 r--s 00000000 08:01 15 /var/lib/fhir gate/000009.sst (deleted)", storeMapping{0x7f10, 0x7f20, prefix + "000009.sst", true}, true},
		{"memtable log", "7f10-7f20 rw-s 00000000 08:01 15 /var/lib/fhir gate/00001.mem", storeMapping{}, false},
		{"sibling directory", "7f10-7f20 r--s 00000000 08:01 15 /var/lib/fhir gate2/000001.sst", storeMapping{}, false},
		{"binary", "00400000-00c00000 r-xp 00000000 08:01 12 /usr/bin/caddy", storeMapping{}, false},
		{"anonymous", "7f40-7f50 rw-p 00000000 00:00 0", storeMapping{}, false},
		{"bad range", "7f50-7f40 r--s 00000000 08:01 15 /var/lib/fhir gate/000001.sst", storeMapping{}, false},
		{"not hex", "zz-7f40 r--s 00000000 08:01 15 /var/lib/fhir gate/000001.sst", storeMapping{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := storeFileMapping(tt.line, prefix)
			if got != tt.want || ok != tt.ok {
				t.Errorf("storeFileMapping = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestTrimmerHandsBackWrittenTables checks the premise and the effect:
// tables Badger has just written are resident in this process, a pass hands
// them back, everything still reads afterwards, and pages those reads bring
// back stay once a table has been handed back twice.
func TestTrimmerHandsBackWrittenTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	kv, err := Open(Options{Dir: dir, TrimInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	s := store.New(kv, store.Options{})
	var logins []*store.Login
	for len(tableFiles(t, dir)) == 0 {
		batch := make([]store.Resource, 100)
		for i := range batch {
			l := &store.Login{User: store.Reference{Reference: "User/u" + strconv.Itoa(len(logins))}, Scope: strings.Repeat("openid ", 40)}
			logins = append(logins, l)
			batch[i] = l
		}
		if err := s.CreateAll(ctx, batch, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if len(logins) > 200_000 {
			t.Fatal("no table written after 200,000 records")
		}
	}
	// Tables are written before they are added to the tree.
	time.Sleep(100 * time.Millisecond)
	before := residentStoreKiB(t, dir)
	if before < 256 {
		t.Fatalf("%d KiB of tables resident after writing %d records; the premise (Badger leaves written tables resident) no longer holds", before, len(logins))
	}
	tr := newTrimmer(dir)
	n, err := tr.pass()
	if err != nil || n == 0 {
		t.Fatalf("first pass = %d, %v", n, err)
	}
	after := residentStoreKiB(t, dir)
	t.Logf("%d tables: %d KiB resident before the pass, %d KiB after", len(tableFiles(t, dir)), before, after)
	if after > before/10 {
		t.Errorf("resident table memory %d KiB -> %d KiB; want it (nearly) all handed back", before, after)
	}
	readAll := func() {
		t.Helper()
		for _, want := range logins {
			got, err := store.Get[store.Login](ctx, s, want.ID)
			if err != nil || got.UserID() != want.UserID() {
				t.Fatalf("Login %s after paging out: %+v, %v", want.ID, got, err)
			}
		}
	}
	readAll()
	if _, err := tr.pass(); err != nil {
		t.Fatal(err)
	}
	if got := residentStoreKiB(t, dir); got > before/10 {
		t.Errorf("second pass left %d KiB resident", got)
	}
	readAll()
	read := residentStoreKiB(t, dir)
	if read == 0 {
		t.Fatal("reading every record brought no table page back; the last check would prove nothing")
	}
	if _, err := tr.pass(); err != nil {
		t.Fatal(err)
	}
	if got := residentStoreKiB(t, dir); got < read {
		t.Errorf("a third pass handed back pages that reads brought in (%d -> %d KiB); a table is handed back only twice", read, got)
	}
}

func TestTrimLoopRunsUntilClose(t *testing.T) {
	t.Parallel()
	kv, err := Open(Options{Dir: t.TempDir(), TrimInterval: 5 * time.Millisecond})
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
	off, err := Open(Options{Dir: t.TempDir(), TrimInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	if off.trimEvery != 0 {
		t.Errorf("a negative TrimInterval left trimming on (every %v)", off.trimEvery)
	}
}

func tableFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// residentStoreKiB sums the resident KiB of this process's mappings of the
// table files in dir, from /proc/self/smaps.
func residentStoreKiB(t *testing.T, dir string) int64 {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	byPath, err := procmaps.ResidentKiB(string(smaps))
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for path, kb := range byPath {
		if strings.HasPrefix(path, dir+"/") && filepath.Ext(path) == ".sst" {
			total += kb
		}
	}
	return total
}

// BenchmarkTrimmerPass measures one trimming pass over a store of a few
// hundred tables already handed back (the steady state).
func BenchmarkTrimmerPass(b *testing.B) {
	dir, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	kv, err := Open(Options{Dir: dir, TrimInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer kv.Close()
	s := store.New(kv, store.Options{})
	for i := 0; len(tableFiles(b, dir)) < 300; i++ {
		batch := make([]store.Resource, 100)
		for j := range batch {
			batch[j] = &store.Login{User: store.Reference{Reference: "User/u" + strconv.Itoa(i)}, Scope: strings.Repeat("openid ", 40)}
		}
		if err := s.CreateAll(context.Background(), batch, store.PutOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	tr := newTrimmer(dir)
	for range tablePasses {
		if _, err := tr.pass(); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if _, err := tr.pass(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(tableFiles(b, dir))), "tables")
}
