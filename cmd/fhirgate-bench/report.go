package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
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
	ID    int    `json:"id"`
	Title string `json:"title"`
	// Short is the title in the table (a few words); Title is printed under it.
	Short        string         `json:"short,omitempty"`
	Measurements []*measurement `json:"measurements"`
	Checks       []*check       `json:"checks"`
	// Error is set when the scenario could not run at all.
	Error string `json:"error,omitempty"`
}

// measurement is one load run, or one non-HTTP number (MB/s, MiB).
type measurement struct {
	Name string `json:"name"`
	// Label is the name in the table (a few words; see labelWidth); Name
	// is printed under the table. Empty: the start of Name.
	Label string      `json:"label,omitempty"`
	Load  *loadResult `json:"load,omitempty"`
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
	Name string `json:"name"`
	// Label is the name in the table, as measurement.Label.
	Label   string  `json:"label,omitempty"`
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
	m.Node = nodeVersion()
	return m
}

// nodeVersion is `node --version`, "" without Node.
func nodeVersion() string {
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
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
