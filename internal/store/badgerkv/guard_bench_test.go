package badgerkv

import "testing"

// BenchmarkWriteGuardCheck is the guard's cost per write.
func BenchmarkWriteGuardCheck(b *testing.B) {
	g := newWriteGuard(b.TempDir(), 1<<20)
	for b.Loop() {
		if err := g.check(); err != nil {
			b.Fatal(err)
		}
	}
}
