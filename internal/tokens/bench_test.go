package tokens

import (
	"context"
	"testing"
	"time"
)

// BenchmarkVerifyCold is the full check (ECDSA included) of a token never
// seen before.
func BenchmarkVerifyCold(b *testing.B) {
	e := newBenchEnv(b, Options{CacheSize: -1})
	tok := e.mustAccess(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.svc.Verify(context.Background(), tok, KindAccess); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyCached is the steady state of bearer validation: many
// goroutines re-presenting tokens already verified.
func BenchmarkVerifyCached(b *testing.B) {
	e := newBenchEnv(b, Options{})
	toks := make([]string, 1024)
	for i := range toks {
		toks[i] = e.mustAccess(b)
		if _, err := e.svc.Verify(context.Background(), toks[i], KindAccess); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := e.svc.Verify(context.Background(), toks[i%len(toks)], KindAccess); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

func BenchmarkIssueAccess(b *testing.B) {
	e := newBenchEnv(b, Options{})
	b.ReportAllocs()
	for b.Loop() {
		e.mustAccess(b)
	}
}

type benchEnv struct{ svc *Service }

func newBenchEnv(b *testing.B, opts Options) benchEnv {
	b.Helper()
	opts.Issuer = testIssuer
	opts.Keys = newMemStore()
	svc, err := New(context.Background(), opts)
	if err != nil {
		b.Fatal(err)
	}
	return benchEnv{svc: svc}
}

func (e benchEnv) mustAccess(b *testing.B) string {
	tok, _, err := e.svc.IssueAccess(AccessClaims{
		Sub: "0a6c1e47-3f5e-4c39-9f0e-3b1f3f3c0a11", ClientID: "6a2e1e47-3f5e-4c39-9f0e-3b1f3f3c0a12",
		LoginID: "7b2e1e47-3f5e-4c39-9f0e-3b1f3f3c0a13", Profile: "Practitioner/8c2e1e47-3f5e-4c39-9f0e-3b1f3f3c0a14",
		Scope: "openid offline",
	}, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	return tok
}
