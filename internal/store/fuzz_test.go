package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// identifierWorld is a store with bots in two projects and, beside it, the
// plain list of what was created: the oracle lookups are checked against.
type identifierWorld struct {
	s       *Store
	a, b    string // project ids
	bots    []*Bot
	created int
}

func newIdentifierWorld(tb testing.TB) *identifierWorld {
	tb.Helper()
	w := &identifierWorld{s: newTestStore(tb)}
	w.a, w.b = seedProject(tb, w.s, "A").ID, seedProject(tb, w.s, "B").ID
	const sys = "https://example.com/bots"
	for _, b := range []struct {
		project string
		ids     []Identifier
	}{
		{w.a, []Identifier{{sys, "echo"}}},
		{w.a, []Identifier{{"", "plain"}}},
		{w.a, []Identifier{{"a|b", "c"}}},
		{w.a, []Identifier{{"a", "b|c"}}},
		{w.a, []Identifier{{"x/y", "%2F"}, {"x", "y/%2F"}}},
		{w.a, []Identifier{{"s1", "dup"}}},
		{w.a, []Identifier{{"s2", "dup"}}},
		{w.a, []Identifier{{"s1", "m"}, {"s2", "m"}}},
		{w.a, []Identifier{{"", "é"}, {"ÉCHO", "echo"}}},
		{w.b, []Identifier{{sys, "echo"}}},
		{w.b, []Identifier{{sys, "beta-only"}, {"", "plain"}}},
	} {
		w.add(tb, b.project, b.ids)
	}
	return w
}

func (w *identifierWorld) add(tb testing.TB, project string, ids []Identifier) {
	tb.Helper()
	bot := &Bot{base: Base{Meta: Meta{Project: project}}, Name: "bot", Identifier: ids}
	if err := w.s.Create(context.Background(), bot, PutOptions{}); err != nil {
		tb.Fatalf("creating a bot with %v: %v", ids, err)
	}
	w.bots = append(w.bots, bot)
}

// lookupOracle is what BotByIdentifier must answer: the bot holding exactly
// system|value in the project; with no system, else the single bot holding
// the value under any system, a conflict when several do.
func (w *identifierWorld) lookupOracle(project, system, value string) (id string, err error) {
	var anyValue []string
	for _, b := range w.bots {
		if b.Meta.Project != project {
			continue
		}
		for _, ident := range b.Identifier {
			if ident.System == system && ident.Value == value {
				return b.ID, nil
			}
			if ident.Value == value && !slices.Contains(anyValue, b.ID) {
				anyValue = append(anyValue, b.ID)
			}
		}
	}
	switch {
	case system != "" || len(anyValue) == 0:
		return "", ErrNotFound
	case len(anyValue) > 1:
		return "", ErrConflict
	}
	return anyValue[0], nil
}

// searchOracle is what List with Filter.Identifier must answer: every bot of
// the project holding the token's value, under its system unless the token
// names none ("value" alone).
func (w *identifierWorld) searchOracle(project, token string) []string {
	system, value, anySystem := parseIdentifierFilter(token)
	var ids []string
	for _, b := range w.bots {
		if b.Meta.Project != project {
			continue
		}
		for _, ident := range b.Identifier {
			if ident.Value == value && (anySystem || ident.System == system) {
				ids = append(ids, b.ID)
				break
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// FuzzBotIdentifier looks up arbitrary identifier tokens the way $execute
// (system|value, split at the first "|") and Bot search do, in two projects,
// and then creates a bot with an arbitrary system and value and finds it
// again. Lookups must never panic and must find exactly the bot the token
// names within the caller's project (or nothing, or a conflict for an
// ambiguous value), never another project's. Seeds:
// testdata/fuzz/FuzzBotIdentifier and below.
func FuzzBotIdentifier(f *testing.F) {
	w := newIdentifierWorld(f)
	for _, s := range []struct{ query, system, value string }{
		{"https://example.com/bots|echo", "https://example.com/bots", "new"},
		{"echo", "", "solo"},
		{"|plain", "", "plain"},
		{"a|b|c", "a|b", "c2"},
		{"x/y|%2F", "x/y", "%2F"},
		{"dup", "s3", "dup"},
		{"m", "", "m"},
		{"beta-only", "https://example.com/bots", "beta-only"},
		{"|", "|", "|"},
		{"", "", ""},
		{"%7C|%2F", "%", "/"},
		{"\x00|\xff", "\x00", "\x01"},
	} {
		f.Add(s.query, s.system, s.value)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, query, system, value string) {
		for _, project := range []string{w.a, w.b} {
			// $execute?identifier=: split at the first "|", no "|" means no system.
			sys, val, ok := strings.Cut(query, "|")
			if !ok {
				sys, val = "", query
			}
			got, err := w.s.BotByIdentifier(ctx, project, sys, val)
			wantID, wantErr := w.lookupOracle(project, sys, val)
			switch {
			case wantErr != nil && !errors.Is(err, wantErr):
				t.Fatalf("BotByIdentifier(%q, %q) in %s: %v, want %v", sys, val, project, err, wantErr)
			case wantErr == nil && (err != nil || got.ID != wantID):
				t.Fatalf("BotByIdentifier(%q, %q) in %s: %v %v, want bot %s", sys, val, project, got, err, wantID)
			case err == nil && got.Meta.Project != project:
				t.Fatalf("lookup in %s found a bot of %s", project, got.Meta.Project)
			}

			if query == "" {
				continue // no filter at all: a plain listing
			}
			found, err := Search[Bot](ctx, w.s, Filter{Project: project, Identifier: query})
			if err != nil {
				t.Fatalf("searching %q in %s: %v", query, project, err)
			}
			var ids []string
			for _, b := range found {
				ids = append(ids, b.ID)
			}
			slices.Sort(ids)
			if want := w.searchOracle(project, query); !slices.Equal(ids, want) {
				t.Fatalf("search %q in %s found %v, want %v", query, project, ids, want)
			}
		}

		// A bot created with any identifier is found by exactly that
		// identifier in its project and not in the other. A blank value is
		// refused by validation, and invalid UTF-8 is left out: no API can
		// store it (JSON decoding replaces it).
		if strings.TrimSpace(value) == "" || w.created >= 500 || !utf8.ValidString(system) || !utf8.ValidString(value) || len(system)+len(value) > 4096 {
			return
		}
		bot := &Bot{base: Base{Meta: Meta{Project: w.a}}, Name: "fuzz", Identifier: []Identifier{{system, value}}}
		err := w.s.Create(ctx, bot, PutOptions{})
		if w.holdsExactly(w.a, system, value) {
			if !errors.Is(err, ErrConflict) {
				t.Fatalf("a second bot with %q|%q: %v, want a conflict", system, value, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("creating a bot with %q|%q: %v", system, value, err)
		}
		w.bots = append(w.bots, bot)
		w.created++
		got, err := w.s.BotByIdentifier(ctx, w.a, system, value)
		if err != nil || got.ID != bot.ID {
			t.Fatalf("the new bot with %q|%q is found as %v %v", system, value, got, err)
		}
		if other, err := w.s.BotByIdentifier(ctx, w.b, system, value); err == nil && other.Meta.Project != w.b {
			t.Fatalf("project B's lookup found project %s's bot", other.Meta.Project)
		}
	})
}

// holdsExactly tells whether a bot of the project has exactly system|value.
func (w *identifierWorld) holdsExactly(project, system, value string) bool {
	for _, b := range w.bots {
		if b.Meta.Project == project && slices.Contains(b.Identifier, Identifier{system, value}) {
			return true
		}
	}
	return false
}
