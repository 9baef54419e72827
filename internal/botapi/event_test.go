package botapi

import "testing"

func TestChildTraceparentKeepsTheTrace(t *testing.T) {
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	child, ok := childTraceparent(parent)
	if !ok || !traceparentSyntax.MatchString(child) {
		t.Fatalf("child %q, %v", child, ok)
	}
	if child[:36] != parent[:36] || child[52:] != parent[52:] || child[36:52] == parent[36:52] {
		t.Fatalf("child %q of %q: want the same version, trace id and flags with a new parent id", child, parent)
	}
	if again, _ := childTraceparent(parent); again == child {
		t.Fatal("two calls got the same parent id")
	}
	if _, ok := childTraceparent("1b4e28ba-2fa1-11d2-883f-0016d3cca427"); ok {
		t.Fatal("a UUID trace id is not a traceparent")
	}
}
