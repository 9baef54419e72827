package store

import (
	"context"
	"errors"
	"testing"
)

func TestCreateAllIsAllOrNothing(t *testing.T) {
	st := newTestStore(t)
	ctx := context.Background()
	ok := []Resource{&User{Email: "a@example.com"}, &User{Email: "b@example.com"}}
	if err := st.CreateAll(ctx, ok, PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range ok {
		if r.Base().ID == "" {
			t.Fatal("CreateAll did not assign an id")
		}
		if _, err := Get[User](ctx, st, r.Base().ID); err != nil {
			t.Fatalf("created user missing: %v", err)
		}
	}
	// The second user collides with an existing email: nothing is written.
	bad := []Resource{&User{Email: "c@example.com"}, &User{Email: "A@example.com"}}
	err := st.CreateAll(ctx, bad, PutOptions{})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("err = %v, want a conflict", err)
	}
	if bad[0].Base().ID != "" {
		t.Fatal("a failed CreateAll left an id on its input")
	}
	if _, err := st.UserByEmail(ctx, "c@example.com"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the first user of a failed batch was written: %v", err)
	}
	// Invalid input is refused before anything is written.
	if err := st.CreateAll(ctx, []Resource{&User{}}, PutOptions{}); err == nil {
		t.Fatal("invalid user accepted")
	}
}
