package adminapi

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fhirgate/fhirgate/internal/fhirstore"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/pgkv"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
)

func TestMain(m *testing.M) { os.Exit(pgkvtest.Main(m)) }

// cuttableProxy forwards loopback connections to PostgreSQL until cut.
type cuttableProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startCuttableProxy(t *testing.T, target string) *cuttableProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cuttableProxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
			go func() { _, _ = io.Copy(c, s); _ = c.Close() }()
		}
	}()
	t.Cleanup(p.cut)
	return p
}

// cut stops accepting and drops every connection: PostgreSQL is gone.
func (p *cuttableProxy) cut() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// TestPostgresDownOrHungAnswers503WithRetryAfter: on the PostgreSQL
// storage, a write that waits on a hung database past the storage's
// timeout, or finds the server gone, is answered 503 with Retry-After,
// not 500 and not held.
func TestPostgresDownOrHungAnswers503WithRetryAfter(t *testing.T) {
	dsn := pgkvtest.DSN(t)
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startCuttableProxy(t, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	viaProxy := "postgres://" + cfg.User + "@" + proxy.ln.Addr().String() + "/" + cfg.Database +
		"?sslmode=disable&connect_timeout=2&search_path=" + cfg.RuntimeParams["search_path"]
	kv, err := pgkv.Open(context.Background(), pgkv.Options{DSN: viaProxy, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kv.Close() })
	st := store.New(kv, store.Options{})
	api := &testAPI{t: t, st: st, h: New(Options{Store: st, MaxBody: 4096})}
	api.mustCreate("Project", `{"resourceType":"Project","name":"before"}`)

	check := func(what string) {
		t.Helper()
		status, out, h := api.do("POST", "/fhirgate/Project", "application/json", `{"resourceType":"Project","name":"`+what+`"}`)
		if status != http.StatusServiceUnavailable || h.Get("Retry-After") != fhirstore.UnwritableRetryAfter {
			t.Fatalf("%s: %d Retry-After %q: %v; want 503 with Retry-After", what, status, h.Get("Retry-After"), out)
		}
	}

	// A session holding the table: the write waits, then gives up.
	ctx := context.Background()
	stuck, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close(ctx)
	if _, err := stuck.Exec(ctx, `BEGIN; LOCK TABLE fhirgate_kv IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	check("hung")
	if _, err := stuck.Exec(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}

	proxy.cut()
	check("down")
}
