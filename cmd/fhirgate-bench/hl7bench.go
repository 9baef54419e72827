package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/fhirgate/fhirgate/internal/hl7"
)

// medplumVersion is the newest @medplum/core that runs on Node 20 (5.x
// needs Node 22).
const medplumVersion = "4.5.2"

//go:embed hl7bench.cjs
var medplumBenchJS []byte

// hl7Result is one parser's throughput over the corpus.
//
// CPUSeconds is the CPU time of the whole process (Go: every thread,
// garbage collector included; Node: likewise, JIT and GC helpers included),
// so MBpCPUs is steadier than MBps when other work shares the machine.
type hl7Result struct {
	Rounds     int     `json:"rounds"`
	Seconds    float64 `json:"seconds"`
	Bytes      int64   `json:"bytes"`
	MBps       float64 `json:"mb_per_s"`
	CPUSeconds float64 `json:"cpu_seconds"`
	MBpCPUs    float64 `json:"mb_per_cpu_s"`
}

// hl7Scenario is scenario 4: parse + read every component + serialise, in
// MB/s, our parser against @medplum/core's on the same corpus.
func (h *harness) hl7Scenario(ctx context.Context) (*scenario, error) {
	s := &scenario{ID: 4, Short: "HL7 v2", Title: "HL7 v2 parse + read every field + serialise (internal/hl7/testdata)"}
	files, err := filepath.Glob(filepath.Join(h.root, "internal", "hl7", "testdata", "*.hl7"))
	if err != nil || len(files) == 0 {
		return s, fmt.Errorf("finding the HL7 corpus: none in internal/hl7/testdata (%v)", err)
	}
	sort.Strings(files)
	texts := make([]string, len(files))
	var size int64
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return s, fmt.Errorf("reading corpus: %w", err)
		}
		texts[i] = string(b)
		size += int64(len(b))
	}
	corpus := map[string]any{"files": len(files), "bytes": size}

	dur := time.Duration(h.set.HL7)
	goRes, err := benchGoHL7(ctx, texts, size, dur/4, dur)
	if err != nil {
		return s, err
	}
	h.logf("  %-28s %8.1f MB/s  %.1f MB/CPU-s", "4-hl7-go", goRes.MBps, goRes.MBpCPUs)
	s.Measurements = append(s.Measurements, &measurement{
		Label: "fhirgate",
		Name:  fmt.Sprintf("fhirgate internal/hl7 (%.0f MB per CPU-second)", goRes.MBpCPUs), Value: goRes.MBps, Unit: "MB/s",
		Extra: map[string]any{"corpus": corpus, "result": goRes},
	})

	const name = "throughput ratio fhirgate/medplum"
	mp, why := h.benchMedplum(ctx, files, dur/4, dur)
	if why != "" {
		s.Measurements = append(s.Measurements, &measurement{Label: "@medplum/core", Name: "@medplum/core " + medplumVersion + " (Node)", Unavailable: why})
		s.Checks = append(s.Checks, unavailableCheck(name, ">=", 3, "", "medplum not measured"))
		return s, ctx.Err()
	}
	h.logf("  %-28s %8.1f MB/s  %.1f MB/CPU-s", "4-hl7-medplum", mp.MBps, mp.MBpCPUs)
	s.Measurements = append(s.Measurements, &measurement{
		Label: "@medplum/core " + medplumVersion,
		Name:  fmt.Sprintf("@medplum/core %s in Node (%.0f MB per CPU-second)", medplumVersion, mp.MBpCPUs), Value: mp.MBps, Unit: "MB/s",
		Extra: map[string]any{"result": mp},
	})
	perCPU := newCheck("MB per CPU-second ratio fhirgate/medplum", ratio(goRes.MBpCPUs, mp.MBpCPUs), ">=", 3, "")
	perCPU.Verdict, perCPU.Note, perCPU.Label = verdictNA, "information: insensitive to other work on the machine", "ratio per CPU-second"
	tput := newCheck(name, ratio(goRes.MBps, mp.MBps), ">=", 3, "")
	tput.Label = "ratio MB/s"
	s.Checks = append(s.Checks, tput, perCPU)
	return s, nil
}

// benchGoHL7 runs the workload on one goroutine, like Node's one thread.
func benchGoHL7(ctx context.Context, texts []string, size int64, warmup, d time.Duration) (hl7Result, error) {
	sink := 0
	run := func(d time.Duration) (int, time.Duration, error) {
		rounds := 0
		start := time.Now()
		for time.Since(start) < d {
			if ctx.Err() != nil {
				return 0, 0, ctx.Err()
			}
			for _, text := range texts {
				n, err := hl7ParseReadSerialize(text)
				if err != nil {
					return 0, 0, err
				}
				sink += n
			}
			rounds++
		}
		return rounds, time.Since(start), nil
	}
	if _, _, err := run(warmup); err != nil {
		return hl7Result{}, err
	}
	cpu0, err := ownCPU()
	if err != nil {
		return hl7Result{}, err
	}
	rounds, took, err := run(d)
	if err != nil {
		return hl7Result{}, err
	}
	cpu1, err := ownCPU()
	if err != nil {
		return hl7Result{}, err
	}
	if sink == 0 {
		return hl7Result{}, errors.New("hl7 benchmark read nothing")
	}
	bytes := int64(rounds) * size
	cpu := (cpu1 - cpu0).Seconds()
	return hl7Result{
		Rounds: rounds, Seconds: took.Seconds(), Bytes: bytes, MBps: float64(bytes) / took.Seconds() / 1e6,
		CPUSeconds: cpu, MBpCPUs: float64(bytes) / cpu / 1e6,
	}, nil
}

// hl7ParseReadSerialize is the compared workload for one message: parse,
// read every component of every repetition of every field, serialise. It
// returns the characters seen so the work cannot be optimised away.
func hl7ParseReadSerialize(text string) (int, error) {
	m, err := hl7.Parse(text)
	if err != nil {
		return 0, fmt.Errorf("parsing corpus message: %w", err)
	}
	n := 0
	for _, seg := range m.Segments() {
		for i, fields := 0, seg.FieldCount(); i <= fields; i++ {
			f := seg.Field(i)
			for r, reps := 0, f.Repetitions(); r < reps; r++ {
				for _, v := range f.Components(r) {
					n += len(v)
				}
			}
		}
	}
	return n + len(m.String()), nil
}

// benchMedplum installs @medplum/core with npm (once, into the user cache
// directory) and runs the same workload in Node. A missing Node or npm, or
// an install that fails, makes the comparison unavailable, not the run.
func (h *harness) benchMedplum(ctx context.Context, files []string, warmup, d time.Duration) (hl7Result, string) {
	if _, err := exec.LookPath("node"); err != nil {
		return hl7Result{}, "node is not installed"
	}
	dir, err := medplumDir()
	if err != nil {
		return hl7Result{}, err.Error()
	}
	if err := installMedplum(ctx, dir); err != nil {
		return hl7Result{}, err.Error()
	}
	script := filepath.Join(dir, "hl7bench.cjs")
	if err := os.WriteFile(script, medplumBenchJS, 0o600); err != nil {
		return hl7Result{}, fmt.Sprintf("writing the node script: %v", err)
	}
	args := append([]string{script, fmt.Sprint(warmup.Milliseconds()), fmt.Sprint(d.Milliseconds())}, files...)
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return hl7Result{}, fmt.Sprintf("node failed: %v: %s", err, oneLine(stderr.String(), 200))
	}
	var res hl7Result
	if err := json.Unmarshal(out, &res); err != nil || res.Rounds == 0 {
		return hl7Result{}, fmt.Sprintf("node printed no result: %s", oneLine(string(out), 200))
	}
	return res, ""
}

// medplumDir is where @medplum/core is installed: the user cache directory,
// so repeated runs do not reinstall it.
func medplumDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "fhirgate-bench", "medplum-core-"+medplumVersion)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	return dir, nil
}

// installMedplum runs npm install unless that version is already there.
func installMedplum(ctx context.Context, dir string) error {
	pkg := filepath.Join(dir, "node_modules", "@medplum", "core", "package.json")
	if data, err := os.ReadFile(pkg); err == nil {
		var p struct {
			Version string `json:"version"`
		}
		if json.Unmarshal(data, &p) == nil && p.Version == medplumVersion {
			return nil
		}
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return errors.New("npm is not installed")
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"private":true}`+"\n"), 0o644); err != nil {
		return fmt.Errorf("writing package.json: %w", err)
	}
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--no-save", "@medplum/core@"+medplumVersion)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("npm install @medplum/core@%s failed: %v: %s", medplumVersion, err, oneLine(string(out), 200))
	}
	return nil
}

// ownCPU is this process's user+system CPU time.
func ownCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("reading own CPU time: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
