package kvbackup_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/badgerkv"
	"github.com/fhirgate/fhirgate/internal/store/pgkv"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
	"github.com/fhirgate/fhirgate/internal/tokens"
)

func TestMain(m *testing.M) { os.Exit(pgkvtest.Main(m)) }

func openBadger(t *testing.T) *badgerkv.KV {
	t.Helper()
	kv, err := badgerkv.Open(badgerkv.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kv.Close() })
	return kv
}

func openPostgres(t *testing.T) (*pgkv.KV, string) {
	t.Helper()
	dsn := pgkvtest.DSN(t)
	kv, err := pgkv.Open(context.Background(), pgkv.Options{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kv.Close() })
	return kv, dsn
}

const issuer = "https://gw.example.com"

// gateway is what a gateway keeps: a project with a client, users and
// their memberships, a bot with its code, a signed-in session (a Login,
// with a TTL) and the signing keys (one retired by a rotation, one
// active), plus the tokens issued from them.
type gateway struct {
	access, refresh, oldAccess string
	login                      *store.Login
}

func seedGateway(t *testing.T, s *store.Store) gateway {
	t.Helper()
	ctx := context.Background()
	create := func(r store.Resource, o store.PutOptions) {
		t.Helper()
		if err := s.Create(ctx, r, o); err != nil {
			t.Fatalf("creating %T: %v", r, err)
		}
	}
	p := &store.Project{Name: "clinic"}
	create(p, store.PutOptions{})
	client := &store.ClientApplication{Name: "web", IdentityProvider: &store.IdentityProvider{UserInfoURL: "https://idp.example.com/userinfo"}}
	client.Base().Meta.Project = p.ID
	create(client, store.PutOptions{})
	var m *store.ProjectMembership
	for _, email := range []string{"alice@example.com", "bob@example.com"} {
		u := &store.User{Email: email}
		create(u, store.PutOptions{})
		m = &store.ProjectMembership{
			Project: store.Reference{Reference: "Project/" + p.ID}, User: store.Reference{Reference: "User/" + u.ID},
			Profile: &store.Reference{Reference: "Practitioner/" + strings.Split(email, "@")[0]}, ExternalID: email,
		}
		create(m, store.PutOptions{})
	}
	code := &store.Binary{ContentType: "application/javascript", Data: "ZXhwb3J0IGFzeW5jIGZ1bmN0aW9uIGhhbmRsZXIoKSB7IHJldHVybiAxOyB9"}
	create(code, store.PutOptions{})
	bot := &store.Bot{Name: "echo", Identifier: []store.Identifier{{System: "https://example.com/bots", Value: "echo"}}}
	bot.Base().Meta.Project = p.ID
	create(bot, store.PutOptions{})
	login := &store.Login{
		User: m.User, Membership: store.Reference{Reference: "ProjectMembership/" + m.ID},
		Client: &store.Reference{Reference: "ClientApplication/" + client.ID}, RefreshSecret: "refresh-secret-1", Granted: true,
	}
	create(login, store.PutOptions{TTL: time.Hour})

	svc, err := tokens.New(ctx, tokens.Options{Issuer: issuer, Keys: oauth.KeyStore{Store: s}})
	if err != nil {
		t.Fatal(err)
	}
	var g gateway
	g.login = login
	g.oldAccess, _, err = svc.IssueAccess(tokens.AccessClaims{Sub: "u", LoginID: login.ID, Scope: "openid"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	if g.access, _, err = svc.IssueAccess(tokens.AccessClaims{Sub: "u", LoginID: login.ID, Scope: "openid"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if g.refresh, _, err = svc.IssueRefresh(tokens.RefreshClaims{ClientID: client.ID, LoginID: login.ID, RefreshSecret: login.RefreshSecret}, time.Hour); err != nil {
		t.Fatal(err)
	}
	return g
}

// dump is every record of s, type by type, as JSON.
func dump(t *testing.T, s *store.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, typ := range store.ResourceTypes() {
		rs, err := s.List(context.Background(), typ, store.Filter{})
		if err != nil {
			t.Fatalf("listing %s: %v", typ, err)
		}
		b, _ := json.Marshal(rs)
		out[typ] = string(b)
	}
	return out
}

// checkTokens verifies the tokens issued before the move against the
// keyring loaded from s, and that the refresh token still finds its
// session.
func checkTokens(t *testing.T, s *store.Store, g gateway) {
	t.Helper()
	ctx := context.Background()
	svc, err := tokens.New(ctx, tokens.Options{Issuer: issuer, Keys: oauth.KeyStore{Store: s}})
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{"access token": g.access, "access token of the retired key": g.oldAccess} {
		if c, err := svc.Verify(ctx, tok, tokens.KindAccess); err != nil || c.LoginID != g.login.ID {
			t.Errorf("%s after the move: %+v, %v", name, c, err)
		}
	}
	c, err := svc.Verify(ctx, g.refresh, tokens.KindRefresh)
	if err != nil {
		t.Fatalf("refresh token after the move: %v", err)
	}
	login, err := store.Get[store.Login](ctx, s, c.LoginID)
	if err != nil || login.RefreshSecret != c.RefreshSecret || login.Revoked {
		t.Fatalf("the refresh token's session after the move: %+v, %v", login, err)
	}
	// The restored store signs too: the active key came along.
	tok, _, err := svc.IssueAccess(tokens.AccessClaims{Sub: "u", LoginID: g.login.ID}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Verify(ctx, tok, tokens.KindAccess); err != nil {
		t.Fatalf("a token issued after the move: %v", err)
	}
}

// TestBadgerBackupRestoresIntoPostgresAndBack: a Badger deployment's
// backup, restored into a fresh PostgreSQL database, gives the same
// records, and the tokens issued before verify and refresh after; a
// backup of that PostgreSQL restores into a fresh Badger the same way.
func TestBadgerBackupRestoresIntoPostgresAndBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := openBadger(t)
	s := store.New(src, store.Options{})
	g := seedGateway(t, s)
	want := dump(t, s)
	if !strings.Contains(want["JsonWebKey"], `"active":true`) || !strings.Contains(want["Login"], g.login.ID) {
		t.Fatalf("the seeded store lacks keys or the session: %v", want)
	}

	var buf bytes.Buffer
	if err := src.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	pg, dsn := openPostgres(t)
	if err := pg.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatalf("restoring a Badger backup into PostgreSQL: %v", err)
	}
	onPG := store.New(pg, store.Options{})
	assertSame(t, "PostgreSQL", dump(t, onPG), want)
	checkTokens(t, onPG, g)
	// The session keeps its expiry: an hour from when it was written.
	secs := pgkvtest.QueryInt(t, dsn, `SELECT extract(epoch FROM expires_at - now())::bigint FROM fhirgate_kv WHERE key = $1`,
		[]byte("r/Login/"+g.login.ID))
	if secs < 50*60 || secs > 61*60 {
		t.Errorf("the restored session expires in %d s, want about an hour", secs)
	}
	// Indexes came along: lookups work.
	if _, err := onPG.UserByEmail(ctx, "alice@example.com"); err != nil {
		t.Errorf("email index after the move: %v", err)
	}

	buf.Reset()
	if err := pg.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	back := openBadger(t)
	if err := back.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatalf("restoring a PostgreSQL backup into Badger: %v", err)
	}
	onBadger := store.New(back, store.Options{})
	assertSame(t, "Badger again", dump(t, onBadger), want)
	checkTokens(t, onBadger, g)
}

func assertSame(t *testing.T, where string, got, want map[string]string) {
	t.Helper()
	for typ, w := range want {
		if got[typ] != w {
			t.Errorf("%s: %s records differ:\n got %s\nwant %s", where, typ, got[typ], w)
		}
	}
}

// TestPostgresRestoreMergesAndIsAllOrNothing: restoring keeps the rows
// only the database has, the backup's values win, and a stream cut in the
// middle writes nothing.
func TestPostgresRestoreMergesAndIsAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := openBadger(t)
	s := store.New(src, store.Options{})
	u := &store.User{Email: "kept@example.com"}
	if err := s.Create(ctx, u, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3000 { // several records of the stream, several statements of the restore
		if err := s.Create(ctx, &store.User{Email: "u" + strconv.Itoa(i) + "@example.com"}, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := src.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	pg, dsn := openPostgres(t)
	onPG := store.New(pg, store.Options{})
	if err := pg.Restore(bytes.NewReader(buf.Bytes()[:buf.Len()-10])); err == nil {
		t.Fatal("a truncated backup restored")
	}
	if n := pgkvtest.QueryInt(t, dsn, `SELECT count(*) FROM fhirgate_kv`); n != 0 {
		t.Fatalf("a failed restore left %d keys", n)
	}
	only := &store.User{Email: "only-in-pg@example.com"}
	if err := onPG.Create(ctx, only, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	renamed := *u
	renamed.Email = "renamed@example.com"
	if _, err := onPG.Put(ctx, &renamed, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pg.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if got, err := store.Get[store.User](ctx, onPG, u.ID); err != nil || got.Email != "kept@example.com" {
		t.Errorf("the backup's value did not win: %+v, %v", got, err)
	}
	if _, err := store.Get[store.User](ctx, onPG, only.ID); err != nil {
		t.Errorf("a record only in PostgreSQL was dropped: %v", err)
	}
	if n := pgkvtest.QueryInt(t, dsn, `SELECT count(*) FROM fhirgate_kv WHERE key LIKE 'r/User/%'`); n != 3002 {
		t.Errorf("users after the restore: %d, want the backup's 3001 and one of PostgreSQL's own", n)
	}
}
