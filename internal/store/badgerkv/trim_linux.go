package badgerkv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/fhirgate/fhirgate/internal/procmaps"
)

// canPageOut tells Open whether to start the trimming loop.
const canPageOut = true

// trimmer asks the kernel to reclaim the resident pages of this process's
// mappings of the store's table (.sst) and value-log (.vlog) files.
//
// Why: Badger writes every table through a shared memory mapping, syncs it
// and keeps it mapped, so each byte the gateway stores stays resident in
// its memory (and as mapped page cache, which the kernel reclaims last)
// until compaction replaces the table — RSS grows with the data, not with
// the load. Nothing needs the pages of a table just written: reads want a
// few hot blocks, which the next read brings back. RocksDB does the same
// for its compaction output (dropping it from the page cache once
// written).
//
// What: a table is handed back on the first two passes that see it (a
// table caught while Badger was still writing it is complete by the next
// one) and then left alone, so the pages reads bring back stay cached like
// any file's. The value log is handed back on every pass: the current file
// keeps growing, and its values (AuditEvents, Logins, bot code) are read
// rarely: a session's Login at most once a second, behind the session
// cache; bot code once per deployed version, behind the code cache.
//
// Safety: MADV_PAGEOUT is advice that never changes memory contents; the
// kernel writes back or skips dirty pages and brings reclaimed ones back on
// the next access. That matters because the list of mappings is read before
// the advice is given, and Badger may unmap a table in between: the range
// may then be unmapped (ENOMEM, ignored) or reused by another mapping, which
// at worst is paged out too — still with its contents intact. MADV_DONTNEED
// would zero reused anonymous memory, which is why it is not used here.
type trimmer struct {
	prefix string         // the store directory, absolute, symlinks resolved, with a trailing separator
	tables map[string]int // passes that have handed each table back
}

// tablePasses is how many passes hand a table back before it is left alone.
const tablePasses = 2

func newTrimmer(dir string) *trimmer {
	return &trimmer{prefix: filepath.Clean(dir) + string(filepath.Separator), tables: map[string]int{}}
}

// pass runs one trimming pass and returns how many mappings it advised.
func (t *trimmer) pass() (int, error) {
	maps, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, fmt.Errorf("reading own mappings: %w", err)
	}
	defer maps.Close()
	mapped := make(map[string]bool, len(t.tables))
	advised := 0
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		m, ok := storeFileMapping(sc.Text(), t.prefix)
		if !ok {
			continue
		}
		if m.table {
			mapped[m.path] = true
			if t.tables[m.path] >= tablePasses {
				continue
			}
			t.tables[m.path]++
		}
		_, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_PAGEOUT)
		switch {
		case errno == 0:
			advised++
		case errno == unix.ENOMEM: // unmapped since the list was read
		case errno == unix.EINVAL:
			return advised, errors.New("the kernel does not support MADV_PAGEOUT (Linux 5.4 or later)")
		default:
			return advised, fmt.Errorf("madvise: %w", errno)
		}
	}
	if err := sc.Err(); err != nil {
		return advised, fmt.Errorf("reading own mappings: %w", err)
	}
	for path := range t.tables {
		if !mapped[path] { // compacted away
			delete(t.tables, path)
		}
	}
	return advised, nil
}

// storeMapping is one mapping of a store file.
type storeMapping struct {
	start, end uintptr
	path       string
	table      bool // .sst; otherwise .vlog
}

// storeFileMapping reports the mapping on one line of /proc/self/maps
// when it maps a table or value-log file whose path starts with prefix.
func storeFileMapping(line, prefix string) (storeMapping, bool) {
	m, ok := procmaps.Parse(line)
	if !ok || !strings.HasPrefix(m.Path, prefix) {
		return storeMapping{}, false
	}
	ext := filepath.Ext(m.Path)
	if ext != ".sst" && ext != ".vlog" {
		return storeMapping{}, false
	}
	return storeMapping{start: m.Start, end: m.End, path: m.Path, table: ext == ".sst"}, true
}
