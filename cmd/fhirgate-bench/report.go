package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// report is everything one run measured; it is written as the JSON file
// and rendered as the table.
type report struct {
	Machine   machine     `json:"machine"`
	Mode      string      `json:"mode"` // "full" or "short"
	Settings  settings    `json:"settings"`
	Started   string      `json:"started"`
	Seconds   float64     `json:"seconds"`
	Scenarios []*scenario `json:"scenarios"`
}

// machine identifies where the numbers come from.
type machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	GoVersion string `json:"go_version"`
	OS        string `json:"os"`
	Node      string `json:"node,omitempty"`
	// LoadAvg is /proc/loadavg at the start and the end of the run: other
	// work on the machine shows here, and in throughput but much less in
	// Caddy's CPU per request.
	LoadAvgStart string `json:"loadavg_start,omitempty"`
	LoadAvgEnd   string `json:"loadavg_end,omitempty"`
}

// scenario is one numbered scenario of issue 6.
type scenario struct {
	ID           int            `json:"id"`
	Title        string         `json:"title"`
	Measurements []*measurement `json:"measurements"`
	Checks       []*check       `json:"checks"`
	// Error is set when the scenario could not run at all.
	Error string `json:"error,omitempty"`
}

// measurement is one load run, or one non-HTTP number (MB/s, MiB).
type measurement struct {
	Name string      `json:"name"`
	Load *loadResult `json:"load,omitempty"`
	// Value and Unit hold a number that is not a load run.
	Value float64 `json:"value,omitempty"`
	Unit  string  `json:"unit,omitempty"`
	// Unavailable says why it was not measured (e.g. an endpoint that does
	// not exist yet); such a measurement is neither an error nor a result.
	Unavailable string `json:"unavailable,omitempty"`
	// Extra holds supporting numbers (RSS samples, profiles, sizes).
	Extra map[string]any `json:"extra,omitempty"`
}

// check is one target of issue 6.
type check struct {
	Name    string  `json:"name"`
	Value   float64 `json:"value"`
	Op      string  `json:"op"` // ">=" or "<="
	Target  float64 `json:"target"`
	Unit    string  `json:"unit,omitempty"`
	Verdict string  `json:"verdict"` // PASS, FAIL or n/a
	Note    string  `json:"note,omitempty"`
}

const (
	verdictPass = "PASS"
	verdictFail = "FAIL"
	verdictNA   = "n/a"
)

// newCheck judges value against a target.
func newCheck(name string, value float64, op string, target float64, unit string) *check {
	return &check{Name: name, Value: value, Op: op, Target: target, Unit: unit, Verdict: verdict(value, op, target)}
}

// unavailableCheck is a target that could not be judged.
func unavailableCheck(name, op string, target float64, unit, why string) *check {
	return &check{Name: name, Op: op, Target: target, Unit: unit, Verdict: verdictNA, Note: why}
}

func verdict(value float64, op string, target float64) string {
	var ok bool
	switch op {
	case ">=":
		ok = value >= target
	case "<=":
		ok = value <= target
	default:
		return verdictNA
	}
	if ok {
		return verdictPass
	}
	return verdictFail
}

// ratio is a/b, 0 when b is 0 (nothing measured).
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// failedRequests counts the failed requests of every load run that ran.
func (r *report) failedRequests() uint64 {
	var n uint64
	for _, s := range r.Scenarios {
		for _, m := range s.Measurements {
			if m.Load != nil {
				n += m.Load.errors()
			}
		}
	}
	return n
}

// scenarioErrors lists the scenarios that could not run.
func (r *report) scenarioErrors() []string {
	var out []string
	for _, s := range r.Scenarios {
		if s.Error != "" {
			out = append(out, fmt.Sprintf("%d. %s: %s", s.ID, s.Title, s.Error))
		}
	}
	return out
}

// writeTable renders the report as one table.
func (r *report) writeTable(w io.Writer) error {
	fmt.Fprintf(w, "fhirgate-bench (%s mode): %d CPUs, %s, %s, %s", r.Mode, r.Machine.CPUs, r.Machine.CPUModel, r.Machine.GoVersion, r.Machine.OS)
	if r.Machine.Node != "" {
		fmt.Fprintf(w, ", node %s", r.Machine.Node)
	}
	isolation := r.Settings.BotIsolation
	if isolation == "" {
		isolation = "fhirgate's default"
	}
	if n := r.Settings.BotRunsPerWorker; n > 0 {
		isolation += fmt.Sprintf(", bot_runs_per_worker %d", n)
	}
	pairs := "compared loads run A then B"
	if r.Settings.Rounds > 1 {
		order := comparisonOrder(r.Settings.Rounds)
		names := make([]string, len(order))
		for i, side := range order {
			names[i] = string(rune('A' + side))
		}
		pairs = fmt.Sprintf("compared loads run %s in segments of %s, merged",
			strings.Join(names, "-"), time.Duration(r.Settings.Measure)/time.Duration(r.Settings.Rounds))
	}
	fmt.Fprintf(w, "\nbot_isolation %s; concurrency %d; each load measured %s after %s of warmup (%s); total %.0fs; load average %s at start, %s at end\n\n",
		isolation, r.Settings.Concurrency, time.Duration(r.Settings.Measure), time.Duration(r.Settings.Warmup), pairs, r.Seconds,
		r.Machine.LoadAvgStart, r.Machine.LoadAvgEnd)
	rows := [][]string{{"scenario", "throughput", "p50", "p99", "caddy CPU/req", "errors", "ratio / target", "result"}}
	for _, s := range r.Scenarios {
		rows = append(rows, []string{fmt.Sprintf("**%d. %s**", s.ID, s.Title), "", "", "", "", "", "", ""})
		if s.Error != "" {
			rows = append(rows, []string{"error: " + oneLine(s.Error, 100), "", "", "", "", "", "", ""})
		}
		for _, m := range s.Measurements {
			rows = append(rows, m.row())
		}
		for _, c := range s.Checks {
			rows = append(rows, c.row())
		}
	}
	_, err := io.WriteString(w, markdownTable(rows))
	return err
}

// markdownTable renders rows (the first is the header) as an aligned
// Markdown table, so the output can be pasted into the README as is.
func markdownTable(rows [][]string) string {
	if len(rows) == 0 {
		return ""
	}
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, cell := range row {
			width[i] = max(width[i], utf8.RuneCountInString(cell), 3)
		}
	}
	var b strings.Builder
	line := func(row []string) {
		b.WriteString("|")
		for i, cell := range row {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(cell))
			if i == 0 {
				b.WriteString(" " + cell + pad + " |")
			} else {
				b.WriteString(" " + pad + cell + " |")
			}
		}
		b.WriteString("\n")
	}
	line(rows[0])
	b.WriteString("|")
	for i, wd := range width {
		if i == 0 {
			b.WriteString(" " + strings.Repeat("-", wd) + " |")
		} else {
			b.WriteString(" " + strings.Repeat("-", wd-1) + ": |")
		}
	}
	b.WriteString("\n")
	for _, row := range rows[1:] {
		line(row)
	}
	return b.String()
}

func (m *measurement) row() []string {
	switch {
	case m.Unavailable != "":
		return []string{m.Name, "unavailable", "", "", "", "", oneLine(m.Unavailable, 60), ""}
	case m.Load != nil:
		l := m.Load
		cpu := l.cpuText()
		errs := strconv.FormatUint(l.errors(), 10)
		if l.Throttled > 0 {
			errs += fmt.Sprintf(" (+%d×429)", l.Throttled)
		}
		return []string{m.Name, fmt.Sprintf("%.0f/s", l.Throughput), fmt.Sprintf("%.2fms", l.P50Ms),
			fmt.Sprintf("%.2fms", l.P99Ms), cpu, errs, "", ""}
	default:
		return []string{m.Name, formatValue(m.Value, m.Unit), "", "", "", "", "", ""}
	}
}

func (c *check) row() []string {
	target := fmt.Sprintf("%s %s %s", formatValue(c.Value, c.Unit), c.Op, formatValue(c.Target, c.Unit))
	if c.Verdict == verdictNA && c.Value == 0 {
		target = fmt.Sprintf("n/a (target %s %s)", c.Op, formatValue(c.Target, c.Unit))
	}
	name := "→ " + c.Name
	if c.Note != "" {
		name += " (" + oneLine(c.Note, 80) + ")"
	}
	return []string{name, "", "", "", "", "", target, c.Verdict}
}

// formatValue prints a number with its unit ("0.93", "1234/s", "61.2 MiB").
func formatValue(v float64, unit string) string {
	switch unit {
	case "":
		return fmt.Sprintf("%.2f", v)
	case "/s":
		return fmt.Sprintf("%.0f/s", v)
	case "%":
		return fmt.Sprintf("%.1f%%", v)
	case "ms":
		return fmt.Sprintf("%.3fms", v)
	default:
		return fmt.Sprintf("%.1f %s", v, unit)
	}
}

// oneLine shortens s to one line of at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n-1] + "…"
	}
	return s
}

// describeMachine gathers the machine description for the report.
func describeMachine() machine {
	m := machine{
		CPUs:      runtime.NumCPU(),
		CPUModel:  cpuModel(),
		GoVersion: runtime.Version(),
		OS:        runtime.GOOS + "/" + runtime.GOARCH,
	}
	if out, err := exec.Command("go", "env", "GOVERSION").Output(); err == nil {
		m.GoVersion = strings.TrimSpace(string(out))
	}
	m.LoadAvgStart = loadAvg()
	if out, err := exec.Command("node", "--version").Output(); err == nil {
		m.Node = strings.TrimSpace(string(out))
	}
	return m
}

// cpuModel returns the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	return parseCPUModel(f)
}

func parseCPUModel(r io.Reader) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(key) == "model name" {
			return strings.TrimSpace(value)
		}
	}
	return "unknown"
}

// loadAvg returns the 1, 5 and 15 minute load averages.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
