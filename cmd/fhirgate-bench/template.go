package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// template is a request URL or body with per-request placeholders, so one
// spec can send a distinct subject token on every request without a file
// of pre-generated tokens:
//
//	{seq}         the request's sequence number in this load run (0, 1, ...)
//	{seqmod:N}    seq modulo N: N distinct values, reused in turn
//	{spread:K:N}  (seq mod K) * N / K: K values spread evenly over 0..N-1, so
//	              the same K requests can touch users scattered over a
//	              store of any size N
//
// Anything else between braces is kept literally.
type template struct {
	parts []tmplPart
	fixed string // the whole text when it has no placeholder
}

type tmplPart struct {
	lit  string
	kind int // partLit, partSeq, partSeqMod, partSpread
	mod  uint64
	n    uint64 // partSpread's range
}

const (
	partLit = iota
	partSeq
	partSeqMod
	partSpread
)

// parseTemplate splits s into literal text and placeholders.
func parseTemplate(s string) (template, error) {
	var t template
	rest := s
	var lit strings.Builder
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			lit.WriteString(rest)
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			lit.WriteString(rest)
			break
		}
		name := rest[i+1 : i+j]
		var p tmplPart
		switch {
		case name == "seq":
			p.kind = partSeq
		case strings.HasPrefix(name, "seqmod:"):
			n, err := strconv.ParseUint(strings.TrimPrefix(name, "seqmod:"), 10, 64)
			if err != nil || n == 0 {
				return template{}, fmt.Errorf("parsing placeholder '{%s}': the modulus must be a positive integer", name)
			}
			p.kind, p.mod = partSeqMod, n
		case strings.HasPrefix(name, "spread:"):
			k, n, err := parseSpread(strings.TrimPrefix(name, "spread:"))
			if err != nil {
				return template{}, fmt.Errorf("parsing placeholder '{%s}': %w", name, err)
			}
			p.kind, p.mod, p.n = partSpread, k, n
		default:
			// Not a placeholder: keep the brace and look for one after it
			// (JSON bodies have braces of their own).
			lit.WriteString(rest[:i+1])
			rest = rest[i+1:]
			continue
		}
		lit.WriteString(rest[:i])
		if lit.Len() > 0 {
			t.parts = append(t.parts, tmplPart{lit: lit.String()})
			lit.Reset()
		}
		t.parts = append(t.parts, p)
		rest = rest[i+j+1:]
	}
	if lit.Len() > 0 {
		t.parts = append(t.parts, tmplPart{lit: lit.String()})
	}
	if len(t.parts) <= 1 && (len(t.parts) == 0 || t.parts[0].kind == partLit) {
		t.fixed = s
		t.parts = nil
	}
	return t, nil
}

// render returns the text for request number seq.
func (t template) render(seq uint64) string {
	if t.parts == nil {
		return t.fixed
	}
	var b strings.Builder
	for _, p := range t.parts {
		switch p.kind {
		case partLit:
			b.WriteString(p.lit)
		case partSeq:
			b.WriteString(strconv.FormatUint(seq, 10))
		case partSeqMod:
			b.WriteString(strconv.FormatUint(seq%p.mod, 10))
		case partSpread:
			b.WriteString(strconv.FormatUint(seq%p.mod*p.n/p.mod, 10))
		}
	}
	return b.String()
}

// parseSpread reads "K:N" of a {spread:K:N} placeholder.
func parseSpread(s string) (k, n uint64, err error) {
	ks, ns, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, errors.New("want {spread:K:N}")
	}
	k, errK := strconv.ParseUint(ks, 10, 64)
	n, errN := strconv.ParseUint(ns, 10, 64)
	if errK != nil || errN != nil || k == 0 || n == 0 {
		return 0, 0, errors.New("K and N must be positive integers")
	}
	return k, n, nil
}
