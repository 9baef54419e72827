package badgerkv

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/fhirgate/fhirgate/internal/store"
)

func TestWriteGuardRefusesWhenTheDiskCannotTakeWrites(t *testing.T) {
	tests := []struct {
		name  string
		guard func(t *testing.T) *writeGuard
		ok    bool
	}{
		{"writable with room", func(t *testing.T) *writeGuard { return newWriteGuard(t.TempDir(), 1<<20) }, true},
		{"less free space than the reserve", func(t *testing.T) *writeGuard { return newWriteGuard(t.TempDir(), math.MaxUint64) }, false},
		{"directory gone", func(t *testing.T) *writeGuard {
			return newWriteGuard(filepath.Join(t.TempDir(), "missing"), 1<<20)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.guard(t).check()
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, store.ErrUnwritable)) {
				t.Fatalf("check() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestWriteGuardRecoversAndLeavesNoProbeFiles(t *testing.T) {
	dir := t.TempDir()
	g := newWriteGuard(filepath.Join(dir, "store"), 1<<20)
	if err := g.check(); !errors.Is(err, store.ErrUnwritable) {
		t.Fatalf("missing directory: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "store"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := g.check(); err != nil {
		t.Fatalf("after the directory came back: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "store"))
	if len(entries) != 0 {
		t.Fatalf("probe files left behind: %v", entries)
	}
}

func TestUpdateRefusedWhileUnwritableReadsStillWork(t *testing.T) {
	db, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := store.New(db, store.Options{})
	ctx := context.Background()
	u := &store.User{Email: "a@example.com"}
	if err := st.Create(ctx, u, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	db.guard.reserve = math.MaxUint64
	if err := st.Create(ctx, &store.User{Email: "b@example.com"}, store.PutOptions{}); !errors.Is(err, store.ErrUnwritable) {
		t.Fatalf("write on a full disk: %v", err)
	}
	if got, err := st.UserByEmail(ctx, "a@example.com"); err != nil || got.ID != u.ID {
		t.Fatalf("read on a full disk: %v %v", got, err)
	}
}
