package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestConcurrentCreatesWithDistinctEmails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	const n = 50
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = s.Create(ctx, &User{Email: fmt.Sprintf("user%d@example.com", i)}, PutOptions{})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("creating user %d: %v", i, err)
		}
	}
	users, err := s.List(ctx, "User", Filter{})
	if err != nil || len(users) != n {
		t.Fatalf("List = %d users, %v; want %d", len(users), err, n)
	}
	for i := range n {
		if _, err := s.UserByEmail(ctx, fmt.Sprintf("USER%d@example.com", i)); err != nil {
			t.Fatalf("user %d not indexed: %v", i, err)
		}
	}
}

func TestConcurrentCreatesWithSameEmailHaveOneWinner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	const n = 20
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			// Vary the case: uniqueness is case-insensitive.
			email := "race@example.com"
			if i%2 == 1 {
				email = strings.ToUpper(email)
			}
			errs[i] = s.Create(ctx, &User{Email: email}, PutOptions{})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrConflict):
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d creates won, want exactly 1", won)
	}
	users, err := s.List(ctx, "User", Filter{})
	if err != nil || len(users) != 1 {
		t.Fatalf("List = %d users, %v; want 1", len(users), err)
	}
}

// A membership created while its project is being deleted must not be left
// dangling: exactly one of the two operations wins (see guard keys in
// keys.go).
func TestConcurrentDeleteAndReferenceNeverDangles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	u := seedUser(t, s, "u@example.com")
	for i := range 30 {
		p := seedProject(t, s, fmt.Sprintf("p%d", i))
		var wg sync.WaitGroup
		var delErr, createErr error
		m := &ProjectMembership{Project: Reference{Reference: "Project/" + p.ID}, User: Reference{Reference: "User/" + u.ID}}
		wg.Go(func() { delErr = s.Delete(ctx, "Project", p.ID) })
		wg.Go(func() { createErr = s.Create(ctx, m, PutOptions{}) })
		wg.Wait()

		var ve *ValidationError
		switch {
		case delErr == nil && errors.As(createErr, &ve):
			// The delete won; the membership saw the project missing.
		case createErr == nil && errors.Is(delErr, ErrConflict):
			// The membership won; the delete saw it.
			mustDelete(t, s, "ProjectMembership", m.ID)
			mustDelete(t, s, "Project", p.ID)
		default:
			t.Fatalf("round %d: delete = %v, create = %v", i, delErr, createErr)
		}
		ms, err := s.List(ctx, "ProjectMembership", Filter{Project: p.ID})
		if err != nil || len(ms) != 0 {
			t.Fatalf("round %d: dangling memberships %d, %v", i, len(ms), err)
		}
	}
}
