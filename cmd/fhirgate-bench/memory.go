package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fhirgate/fhirgate/internal/procmaps"
)

// memStatus is a process's resident memory in MiB: in total, anonymous
// (Go heap, goroutine stacks, off-heap allocations) and file-backed (for
// Caddy mostly Badger's memory-mapped tables and value logs, which the
// kernel can drop at will).
//
// Workers and WorkersRSS are caddy's child processes (bot workers) and the
// sum of their VmRSS, which counts the binary's shared pages once per
// worker. TreePSS is the proportional set size of caddy and its workers
// together (shared pages split between the processes sharing them): the
// gateway's real footprint.
//
// Store is the resident part of caddy's mappings of files in its storage
// directory (Badger's tables, value logs and memtable logs), by extension
// in StoreFiles: the share of File that grows with the stored data.
type memStatus struct {
	RSS        float64            `json:"rss_mib"`
	Anon       float64            `json:"anon_mib"`
	File       float64            `json:"file_mib"`
	Store      float64            `json:"store_mib"`
	StoreFiles map[string]float64 `json:"store_files_mib,omitempty"`
	Workers    int                `json:"workers"`
	WorkersRSS float64            `json:"workers_rss_mib"`
	TreePSS    float64            `json:"tree_pss_mib"`
}

// readMem reads the memory of a Caddy and of its descendants from /proc.
func readMem(p *caddyProc) (memStatus, error) {
	pid := p.pid()
	m, err := readProcMem(pid)
	if err != nil {
		return memStatus{}, err
	}
	if p.storeDir != "" {
		smaps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
		if err != nil {
			return memStatus{}, fmt.Errorf("reading smaps: %w", err)
		}
		if m.StoreFiles, err = residentUnder(string(smaps), p.storeDir); err != nil {
			return memStatus{}, err
		}
		for _, v := range m.StoreFiles {
			m.Store += v
		}
	}
	tree, err := processTree(pid)
	if err != nil {
		return memStatus{}, err
	}
	for i, p := range tree {
		pss, err := readPSS(p.pid)
		if err != nil {
			continue // exited meanwhile
		}
		m.TreePSS += pss
		if i == 0 {
			continue
		}
		w, err := readProcMem(p.pid)
		if err != nil {
			continue
		}
		m.Workers++
		m.WorkersRSS += w.RSS
	}
	return m, nil
}

// residentUnder sums, from the text of /proc/<pid>/smaps, the resident MiB
// of the mappings of files inside dir, by file extension.
func residentUnder(smaps, dir string) (map[string]float64, error) {
	byPath, err := procmaps.ResidentKiB(smaps)
	if err != nil {
		return nil, err
	}
	prefix := filepath.Clean(dir) + string(filepath.Separator)
	out := map[string]float64{}
	for path, kb := range byPath {
		if strings.HasPrefix(path, prefix) {
			out[strings.TrimPrefix(filepath.Ext(path), ".")] += float64(kb) / 1024
		}
	}
	return out, nil
}

// readPSS reads a process's proportional set size in MiB.
func readPSS(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, fmt.Errorf("reading smaps_rollup: %w", err)
	}
	return parseKBLine(string(data), "Pss:")
}

// parseKBLine returns the value in MiB of the "<key> <n> kB" line.
func parseKBLine(text, key string) (float64, error) {
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == key && f[2] == "kB" {
			kb, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return 0, fmt.Errorf("parsing %q: %w", strings.TrimSpace(line), err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s line", key)
}

func readProcMem(pid int) (memStatus, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memStatus{}, fmt.Errorf("reading process status: %w", err)
	}
	return parseMem(string(data))
}

// describe renders the breakdown for a table row.
func (m memStatus) describe() string {
	s := fmt.Sprintf("anon %.0f, file %.0f MiB", m.Anon, m.File)
	if m.StoreFiles != nil {
		s += fmt.Sprintf(" of which store %.0f", m.Store)
	}
	if m.Workers > 0 {
		s += fmt.Sprintf("; %d bot workers: RSS %.0f MiB, with caddy PSS %.0f MiB", m.Workers, m.WorkersRSS, m.TreePSS)
	}
	return s
}

// parseMem extracts VmRSS, RssAnon and RssFile (in kB) from
// /proc/<pid>/status, in MiB. VmRSS is required.
func parseMem(status string) (memStatus, error) {
	var m memStatus
	fields := map[string]*float64{"VmRSS:": &m.RSS, "RssAnon:": &m.Anon, "RssFile:": &m.File}
	found := false
	for line := range strings.Lines(status) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		into, ok := fields[f[0]]
		if !ok {
			continue
		}
		if len(f) != 3 || f[2] != "kB" {
			return memStatus{}, fmt.Errorf("parsing %q", strings.TrimSpace(line))
		}
		kb, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return memStatus{}, fmt.Errorf("parsing %q: %w", strings.TrimSpace(line), err)
		}
		*into = kb / 1024
		found = found || f[0] == "VmRSS:"
	}
	if !found {
		return memStatus{}, errors.New("no VmRSS line in process status")
	}
	return m, nil
}
