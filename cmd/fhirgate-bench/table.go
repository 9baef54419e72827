package main

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The table is read in a terminal and pasted into the docs, so it fits in
// tableWidth columns: every row has a short label (measurement.Label,
// check.Label, scenario.Short, or the start of the name when a scenario sets
// none) and a key such as 3b; the full names, notes and error samples are
// listed under the table by key. All rendering is here, so rows added by any
// scenario fit the same way.
const (
	tableWidth = 100
	// labelWidth bounds the label column; longer labels are cut (the
	// full name is under the table).
	labelWidth = 20
)

// tableHeader names the columns with their units.
var tableHeader = []string{"#", "what", "req/s", "p99 ms", "CPU µs/req", "err", "value / target", ""}

// writeTable renders the report: a short description of the run, the
// table, then the details of every row.
func (r *report) writeTable(w io.Writer) error {
	var b strings.Builder
	b.WriteString(r.preamble())
	rows := [][]string{tableHeader}
	var details []string
	for _, s := range r.Scenarios {
		rows = append(rows, []string{strconv.Itoa(s.ID), "**" + cut(cmp.Or(s.Short, s.Title), labelWidth-4) + "**", "", "", "", "", "", ""})
		details = append(details, detail(strconv.Itoa(s.ID)+".", s.Title))
		if s.Error != "" {
			rows = append(rows, []string{"", "error (see below)", "", "", "", "", "", ""})
			details = append(details, detail("", "error: "+oneLine(s.Error, 300)))
		}
		key := keyer(s.ID)
		for _, m := range s.Measurements {
			k := key()
			rows = append(rows, m.row(k))
			details = append(details, m.details(k)...)
		}
		for _, c := range s.Checks {
			k := key()
			rows = append(rows, c.row(k))
			details = append(details, c.details(k)...)
		}
	}
	b.WriteString(markdownTable(rows))
	b.WriteString("\n")
	b.WriteString(wrap("CPU µs/req is the CPU time of the measured server's whole process tree per request; "+
		"a = b+c splits it into the gateway process (b) and its bot workers (c). Rows in detail:", "", ""))
	b.WriteString("\n")
	for _, d := range details {
		b.WriteString(d)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// preamble describes the machine and the settings in lines that fit.
func (r *report) preamble() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fhirgate-bench, %s mode: %d CPUs, %s, %s, %s", r.Mode, r.Machine.CPUs, r.Machine.CPUModel, r.Machine.GoVersion, r.Machine.OS)
	if r.Machine.Node != "" {
		fmt.Fprintf(&b, ", node %s", r.Machine.Node)
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
	fmt.Fprintf(&b, "; bot_isolation %s; concurrency %d; each load measured %s after %s of warm-up; %s; total %.0fs; load average %s at start, %s at end.",
		isolation, r.Settings.Concurrency, time.Duration(r.Settings.Measure), time.Duration(r.Settings.Warmup), pairs, r.Seconds,
		r.Machine.LoadAvgStart, r.Machine.LoadAvgEnd)
	return wrap(b.String(), "", "") + "\n"
}

// keyer numbers the rows of scenario id: 3a, 3b, ..., 3z, 3aa, ...
func keyer(id int) func() string {
	n := 0
	return func() string {
		k := ""
		for i := n; ; i = i/26 - 1 {
			k = string(rune('a'+i%26)) + k
			if i < 26 {
				break
			}
		}
		n++
		return strconv.Itoa(id) + k
	}
}

func (m *measurement) row(key string) []string {
	label := cut(cmp.Or(m.Label, m.Name), labelWidth)
	switch {
	case m.Unavailable != "":
		return []string{key, label, "", "", "", "", "unavailable", ""}
	case m.Load != nil:
		l := m.Load
		return []string{key, label, fmt.Sprintf("%.0f", l.Throughput), fmt.Sprintf("%.2f", l.P99Ms),
			l.cpuCell(), strconv.FormatUint(l.errors(), 10), "", ""}
	default:
		return []string{key, label, "", "", "", "", formatValue(m.Value, m.Unit), ""}
	}
}

// details are the lines under the table for a measurement.
func (m *measurement) details(key string) []string {
	d := []string{detail(key, m.Name)}
	if m.Unavailable != "" {
		d = append(d, detail("", "unavailable: "+oneLine(m.Unavailable, 300)))
	}
	if l := m.Load; l != nil {
		d = append(d, detail("", fmt.Sprintf("p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms; %d requests in %.1f s",
			l.P50Ms, l.P90Ms, l.P99Ms, l.MaxMs, l.Requests, l.Seconds)))
	}
	if l := m.Load; l != nil && l.Throttled > 0 {
		d = append(d, detail("", fmt.Sprintf("+%d answered 429 by admission control (not errors)", l.Throttled)))
	}
	return d
}

func (c *check) row(key string) []string {
	return []string{key, "→ " + cut(cmp.Or(c.Label, c.Name), labelWidth-2), "", "", "", "", c.valueText(), c.Verdict}
}

// valueText is the value against its target ("0.93 ≥ 0.90").
func (c *check) valueText() string {
	op := map[string]string{">=": "≥", "<=": "≤"}[c.Op]
	if op == "" {
		op = c.Op
	}
	if c.Verdict == verdictNA && c.Value == 0 {
		return fmt.Sprintf("n/a (%s %s)", op, formatTarget(c.Target, c.Unit))
	}
	return fmt.Sprintf("%s %s %s", formatValue(c.Value, c.Unit), op, formatTarget(c.Target, c.Unit))
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
		return fmt.Sprintf("%.2f ms", v)
	case "x":
		return fmt.Sprintf("%.1f×", v)
	default:
		return fmt.Sprintf("%.1f %s", v, unit)
	}
}

// formatTarget prints a target beside its value, whose unit it shares:
// as short as it is exact ("0.90", "200", "10%", "2000/s", "8×").
func formatTarget(v float64, unit string) string {
	switch unit {
	case "":
		return fmt.Sprintf("%.2f", v)
	case "/s", "%", "×", "x":
		return strconv.FormatFloat(v, 'f', -1, 64) + map[string]string{"/s": "/s", "%": "%", "x": "×"}[unit]
	default:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
}

func (c *check) details(key string) []string {
	d := c.Name
	if c.Note != "" {
		d += " (" + oneLine(c.Note, 300) + ")"
	}
	return []string{detail(key, d)}
}

// detail is one entry under the table: its key in a narrow column, then
// the text wrapped to the table's width.
func detail(key, text string) string {
	const indent = "      "
	head := fmt.Sprintf("%-*s", len(indent), key)
	if key != "" && !strings.HasSuffix(key, ".") {
		head = fmt.Sprintf("  %-*s", len(indent)-2, key)
	}
	return wrap(text, head, indent)
}

// cpuCell is the CPU per request: the process tree's, and when bot workers
// took a share of it, "tree = gateway+workers".
func (r *loadResult) cpuCell() string {
	if r.ServerCPUPerRequestUs <= 0 {
		return ""
	}
	s := fmt.Sprintf("%.0f", r.ServerCPUPerRequestUs)
	if workers := r.ServerCPUPerRequestUs - r.ServerOwnCPUPerRequestUs; workers >= 1 && workers >= r.ServerCPUPerRequestUs/20 {
		s += fmt.Sprintf(" = %.0f+%.0f", r.ServerOwnCPUPerRequestUs, workers)
	}
	return s
}

// markdownTable renders rows (the first is the header) as an aligned
// Markdown table, so the output can be pasted into the docs as is. The
// first two columns are left-aligned, the others right-aligned.
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
	left := func(i int) bool { return i < 2 }
	var b strings.Builder
	line := func(row []string) {
		b.WriteString("|")
		for i, cell := range row {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(cell))
			if left(i) {
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
		if left(i) {
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

// cut shortens s to one line of at most n characters (runes).
func cut(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// wrap breaks s at spaces into lines of at most tableWidth characters, the
// first starting with head, the others with indent. A word longer than a
// line is left whole.
func wrap(s, head, indent string) string {
	var b strings.Builder
	line, empty := head, true
	for _, word := range strings.Fields(s) {
		switch {
		case empty:
			line += word
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) <= tableWidth:
			line += " " + word
		default:
			b.WriteString(line + "\n")
			line = indent + word
		}
		empty = false
	}
	b.WriteString(line + "\n")
	return b.String()
}
