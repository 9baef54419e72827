package store

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// canPageOut tells OpenBadger whether to start the trimming loop.
const canPageOut = true

// pageOutStoreFiles asks the kernel to reclaim the resident pages of this
// process's mappings of the store's table (.sst) and value-log (.vlog)
// files in dir, and returns how many mappings it advised.
//
// Why: Badger writes every table through a shared memory mapping, syncs it
// and keeps it mapped, so each byte the gateway stores stays resident in
// its memory (and as mapped page cache, which the kernel reclaims last)
// until compaction replaces the table — RSS grows with the data, not with
// the load. Hot reads do not need those pages: blocks are served from
// Badger's block cache, and a block or index page that is needed again is
// faulted back in. It is the same thing RocksDB does for compaction output
// (dropping it from the page cache after writing).
//
// Safety: MADV_PAGEOUT is advice that never changes memory contents; the
// kernel writes back or skips dirty pages and brings reclaimed ones back on
// the next access. That matters because the list of mappings is read before
// the advice is given, and Badger may unmap a table in between: the range
// may then be unmapped (ENOMEM, ignored) or reused by another mapping, which
// at worst is paged out too — still with its contents intact. MADV_DONTNEED
// would zero reused anonymous memory, which is why it is not used here.
//
// dir must be absolute with symlinks resolved, as the kernel prints it.
func pageOutStoreFiles(dir string) (int, error) {
	maps, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, fmt.Errorf("reading own mappings: %w", err)
	}
	defer maps.Close()
	prefix := filepath.Clean(dir) + string(filepath.Separator)
	advised := 0
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		start, end, ok := storeFileMapping(sc.Text(), prefix)
		if !ok {
			continue
		}
		_, _, errno := unix.Syscall(unix.SYS_MADVISE, start, end-start, unix.MADV_PAGEOUT)
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
	return advised, nil
}

// storeFileMapping parses one line of /proc/self/maps ("start-end perms
// offset dev inode" and, after padding, the path, which may hold spaces and
// ends in " (deleted)" for a removed file) and reports the address range
// when it maps a table or value-log file whose path starts with prefix.
func storeFileMapping(line, prefix string) (start, end uintptr, ok bool) {
	f := strings.SplitN(line, " ", 6)
	if len(f) < 6 {
		return 0, 0, false
	}
	path := strings.TrimSuffix(strings.TrimLeft(f[5], " "), " (deleted)")
	if !strings.HasPrefix(path, prefix) {
		return 0, 0, false
	}
	if ext := filepath.Ext(path); ext != ".sst" && ext != ".vlog" {
		return 0, 0, false
	}
	lo, hi, found := strings.Cut(f[0], "-")
	if !found {
		return 0, 0, false
	}
	s, err1 := strconv.ParseUint(lo, 16, 64)
	e, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || e <= s {
		return 0, 0, false
	}
	return uintptr(s), uintptr(e), true
}
