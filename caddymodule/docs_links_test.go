package caddymodule

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestDocsLinks holds README.md and docs/*.md to links that work: every
// relative link names a file or directory in the repository and, with an
// anchor, a heading of that Markdown file.
func TestDocsLinks(t *testing.T) {
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../README.md"}, files...)
	if len(files) < 2 {
		t.Fatalf("no docs/*.md files found next to README.md")
	}
	problems, links := checkDocLinks(files)
	for _, p := range problems {
		t.Error(p)
	}
	if links == 0 {
		t.Fatal("no relative links found: the checker is not reading the docs")
	}
}

// TestDocsLinksCheckerFindsBrokenLinks proves the checker fails on a link to
// a missing file, to a missing heading, and to a missing heading in the same
// file, and passes the working forms.
func TestDocsLinksCheckerFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("docs/b.md", "# B\n\n## Why `process` is the default\n\n## Twice\n\n## Twice\n")
	a := write("README.md", strings.Join([]string{
		"# A",
		"## Local heading",
		"[ok](docs/b.md) [ok](docs/b.md#why-process-is-the-default) [ok](docs/b.md#twice-1)",
		"[ok](#local-heading) [ok](https://example.com/x.md) [ok](docs/)",
		"`[not a link](nowhere.md)`",
		"```",
		"[not a link](nowhere.md)",
		"```",
		"[missing file](docs/c.md)",
		"[missing anchor](docs/b.md#no-such-heading)",
		"[missing local](#nope)",
	}, "\n"))
	problems, links := checkDocLinks([]string{a})
	if links != 8 {
		t.Errorf("counted %d relative links, want 8", links)
	}
	want := []string{"docs/c.md", "docs/b.md#no-such-heading", "#nope"}
	if len(problems) != len(want) {
		t.Fatalf("problems = %q, want one each for %q", problems, want)
	}
	for i, w := range want {
		if !strings.Contains(problems[i], w) {
			t.Errorf("problem %d = %q, want it to name %q", i, problems[i], w)
		}
	}
}

var (
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	mdCodeSpan = regexp.MustCompile("`+[^`]*`+")
	mdHeading  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// checkDocLinks returns one problem per broken relative link in the given
// Markdown files, and how many relative links it checked.
func checkDocLinks(files []string) (problems []string, links int) {
	anchors := map[string]map[string]bool{}
	headings := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := map[string]bool{}
		seen := map[string]int{}
		for _, line := range proseLines(string(raw)) {
			m := mdHeading.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			slug := githubSlug(m[1])
			if n := seen[slug]; n > 0 {
				a[slug+"-"+strconv.Itoa(n)] = true
			} else {
				a[slug] = true
			}
			seen[slug]++
		}
		anchors[path] = a
		return a, nil
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for _, line := range proseLines(string(raw)) {
			line = mdCodeSpan.ReplaceAllString(line, "")
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				path, anchor, _ := strings.Cut(target, "#")
				resolved := file
				if path != "" {
					resolved = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
					if _, err := os.Stat(resolved); err != nil {
						problems = append(problems, file+": link to missing file "+target)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(resolved, ".md") {
					problems = append(problems, file+": anchor in a link to a file that is not Markdown: "+target)
					continue
				}
				a, err := headings(resolved)
				if err != nil {
					problems = append(problems, file+": "+err.Error())
					continue
				}
				if !a[anchor] {
					problems = append(problems, file+": link to missing heading "+target)
				}
			}
		}
	}
	return problems, links
}

// proseLines are the lines of a Markdown text outside fenced code blocks.
func proseLines(text string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return out
}

// githubSlug is the anchor GitHub gives a heading: lower-cased, with
// everything but letters, digits, spaces, hyphens and underscores dropped
// and spaces made hyphens.
func githubSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}
