package pgkv_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/pgkv"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
)

// replicas opens n stores on one PostgreSQL schema, each with its own
// pool, as n gateway processes would.
func replicas(t *testing.T, n int) []*store.Store {
	t.Helper()
	dsn := pgkvtest.DSN(t)
	out := make([]*store.Store, n)
	for i := range out {
		kv, err := pgkv.Open(context.Background(), pgkv.Options{DSN: dsn})
		if err != nil {
			t.Fatalf("opening replica %d: %v", i, err)
		}
		t.Cleanup(func() { _ = kv.Close() })
		out[i] = store.New(kv, store.Options{})
	}
	return out
}

// race runs a and b at once and returns their errors.
func race(a, b func() error) (errA, errB error) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { <-start; errA = a() })
	wg.Go(func() { <-start; errB = b() })
	close(start)
	wg.Wait()
	return errA, errB
}

// oneWinner fails unless exactly one of the errors is nil and the other
// wraps ErrConflict (the gateway's 409).
func oneWinner(t *testing.T, what string, errA, errB error) {
	t.Helper()
	switch {
	case errA == nil && errors.Is(errB, store.ErrConflict):
	case errB == nil && errors.Is(errA, store.ErrConflict):
	default:
		t.Fatalf("%s: replica A = %v, replica B = %v; want one nil and one ErrConflict", what, errA, errB)
	}
}

// TestReplicasCreatingOneEmailHaveOneWinner: two replicas creating users
// with the same address (in different case) at the same instant: exactly
// one wins, the other gets ErrConflict, and one user is stored.
func TestReplicasCreatingOneEmailHaveOneWinner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rs := replicas(t, 2)
	a, b := rs[0], rs[1]
	const rounds = 20
	for i := range rounds {
		email := fmt.Sprintf("race%d@example.com", i)
		errA, errB := race(
			func() error { return a.Create(ctx, &store.User{Email: email}, store.PutOptions{}) },
			func() error {
				return b.Create(ctx, &store.User{Email: strings.ToUpper(email)}, store.PutOptions{})
			},
		)
		oneWinner(t, email, errA, errB)
		if _, err := b.UserByEmail(ctx, email); err != nil {
			t.Fatalf("%s: the winner is not found by email on the other replica: %v", email, err)
		}
	}
	users, err := a.List(ctx, "User", store.Filter{Limit: 1000})
	if err != nil || len(users) != rounds {
		t.Fatalf("List = %d users, %v; want %d", len(users), err, rounds)
	}
}

// TestReplicasIfMatchHasOneWinner: two replicas updating one resource with
// the same If-Match version: one wins, the other gets ErrConflict.
func TestReplicasIfMatchHasOneWinner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rs := replicas(t, 2)
	a, b := rs[0], rs[1]
	p := &store.Project{Name: "p"}
	if err := a.Create(ctx, p, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		cur, err := store.Get[store.Project](ctx, b, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		version := cur.Meta.VersionID
		pa, pb := *cur, *cur
		pa.Name, pb.Name = fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)
		errA, errB := race(
			func() error { _, err := a.Put(ctx, &pa, store.PutOptions{IfMatch: version}); return err },
			func() error { _, err := b.Put(ctx, &pb, store.PutOptions{IfMatch: version}); return err },
		)
		oneWinner(t, fmt.Sprintf("round %d", i), errA, errB)
		got, err := store.Get[store.Project](ctx, a, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{true: pa.Name, false: pb.Name}[errA == nil]; got.Name != want {
			t.Fatalf("round %d: stored name %q, want the winner's %q", i, got.Name, want)
		}
	}
}

// TestReplicasShareSingleUseClaims: a client assertion's jti claimed on
// one replica is refused on the other (the replay cache is the store), and
// two replicas claiming one value at the same instant have one winner.
func TestReplicasShareSingleUseClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rs := replicas(t, 2)
	a, b := rs[0], rs[1]
	if err := a.ClaimOnce(ctx, "client-assertion", "ci/jti-1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := b.ClaimOnce(ctx, "client-assertion", "ci/jti-1", time.Minute); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a replay on the other replica: %v, want ErrConflict", err)
	}
	for i := range 20 {
		v := fmt.Sprintf("ci/race-%d", i)
		errA, errB := race(
			func() error { return a.ClaimOnce(ctx, "client-assertion", v, time.Minute) },
			func() error { return b.ClaimOnce(ctx, "client-assertion", v, time.Minute) },
		)
		oneWinner(t, v, errA, errB)
	}
}
