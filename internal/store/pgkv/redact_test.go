package pgkv

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestOpenErrorsHideThePassword: whatever fails — a DSN pgx cannot parse,
// a server that does not answer, one that refuses the password — the error
// names neither the DSN nor its password.
func TestOpenErrorsHideThePassword(t *testing.T) {
	t.Parallel()
	const secret = "pw-9f3kq7z"
	tests := []struct{ name, dsn string }{
		{"URL with a bad port", "postgres://u:" + secret + "@127.0.0.1:notaport/db"},
		{"URL with a bad parameter", "postgres://u:" + secret + "@127.0.0.1:1/db?connect_timeout=soon"},
		{"key=value with a bad port", "host=127.0.0.1 port=x user=u password=" + secret},
		{"key=value, quoted, unclosed", "host=127.0.0.1 user=u password='" + secret},
		{"nothing listening", "postgres://u:" + secret + "@127.0.0.1:1/db?connect_timeout=2"},
		{"key=value, nothing listening", "host=127.0.0.1 port=1 user=u password=" + secret + " connect_timeout=2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			kv, err := Open(ctx, Options{DSN: tt.dsn})
			if err == nil {
				kv.Close()
				t.Fatal("Open succeeded")
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

// TestRedactKeepsTheCause: the redacted error still unwraps to its cause,
// and hides every form of the password.
func TestRedactKeepsTheCause(t *testing.T) {
	t.Parallel()
	cause := errors.New("dial postgres://u:p%40ss%20w0rd@host/db: refused (password p@ss w0rd, user:p%40ss+w0rd)")
	err := redact(cause, "postgres://u:p%40ss%20w0rd@host/db")
	if !errors.Is(err, cause) {
		t.Fatal("the cause is lost")
	}
	if s := err.Error(); strings.Contains(s, "p@ss w0rd") || strings.Contains(s, "p%40ss") {
		t.Fatalf("the password shows: %s", s)
	}
	if redact(nil, "x") != nil {
		t.Fatal("redact(nil) is not nil")
	}
}
