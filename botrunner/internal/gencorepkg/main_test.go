package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestBundleIsGeneratedFromThePinnedPackage regenerates the bundle from the installed package
// (npm ci in internal/e2e/medplum) and compares it with the committed one, byte for byte.
func TestBundleIsGeneratedFromThePinnedPackage(t *testing.T) {
	pkg := "../../../internal/e2e/medplum/node_modules/@medplum/core"
	if _, err := os.Stat(filepath.Join(pkg, "package.json")); err != nil {
		msg := "the pinned @medplum/core is not installed: run `npm ci` in internal/e2e/medplum"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	out := t.TempDir()
	if err := run(pkg, out); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"corepkg.js", "corepkg_names.txt"} {
		got, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(filepath.Join("../..", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, committed) {
			t.Errorf("botrunner/%s is not what go generate makes from the installed package: run go generate in botrunner", name)
		}
	}
}
