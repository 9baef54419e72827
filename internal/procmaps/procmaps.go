// Package procmaps parses the mapping lines of Linux's /proc/<pid>/maps,
// which are also the header lines of /proc/<pid>/smaps, and sums smaps'
// resident sizes by mapped file. It is plain text parsing and builds
// everywhere; only Linux has the files.
package procmaps

import (
	"fmt"
	"strconv"
	"strings"
)

// Mapping is one memory mapping.
type Mapping struct {
	Start, End uintptr
	// Path is the mapped file's path, without the " (deleted)" the kernel
	// appends for a removed file; "" for an anonymous mapping, or a
	// pseudo-path such as "[heap]".
	Path string
}

// Parse parses one mapping line: "start-end perms offset dev inode" and,
// after padding, the path, which may hold spaces. It reports false for
// anything else, such as the attribute lines of smaps ("Rss:  8 kB").
func Parse(line string) (Mapping, bool) {
	f := strings.SplitN(strings.TrimRight(line, "\n"), " ", 6)
	if len(f) < 5 {
		return Mapping{}, false
	}
	lo, hi, found := strings.Cut(f[0], "-")
	if !found {
		return Mapping{}, false
	}
	s, err1 := strconv.ParseUint(lo, 16, 64)
	e, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || e <= s {
		return Mapping{}, false
	}
	m := Mapping{Start: uintptr(s), End: uintptr(e)}
	if len(f) == 6 {
		m.Path = strings.TrimSuffix(strings.TrimLeft(f[5], " "), " (deleted)")
	}
	return m, true
}

// ResidentKiB sums, from the text of /proc/<pid>/smaps, the resident size
// (the Rss lines) of the mappings of each path, in KiB. Anonymous mappings
// count under "".
func ResidentKiB(smaps string) (map[string]int64, error) {
	out := map[string]int64{}
	path, inMapping := "", false
	for line := range strings.Lines(smaps) {
		if m, ok := Parse(line); ok { // the next mapping's header
			path, inMapping = m.Path, true
			continue
		}
		f := strings.Fields(line)
		if !inMapping || len(f) != 3 || f[0] != "Rss:" || f[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("parsing smaps line %q: %w", strings.TrimSpace(line), err)
		}
		out[path] += kb
	}
	return out, nil
}
