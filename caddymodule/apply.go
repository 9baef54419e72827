package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/deploy"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/tokens"
)

// A config load is all or nothing. Provision builds every declared record,
// validates it as the store would and compiles every declared bot, writing
// nothing; Start, which `caddy validate` never reaches, writes whatever
// differs from the store in one transaction (store.PutAll). A load refused
// at any step leaves every record and version as it was.

// declaredIDs derives stable ids for declared records that have no natural
// id, so that applying the same config twice updates rather than duplicates.
var declaredIDs = uuid.MustParse("6f1c8e0a-6a51-4f43-9b0e-5d0c1f6e2b7a")

func declaredID(parts ...string) string {
	return uuid.NewSHA1(declaredIDs, []byte(strings.Join(parts, "\x00"))).String()
}

// declared is the checked content of the config's projects, ready to be
// written.
type declared struct {
	projects []*declaredProject
}

type declaredProject struct {
	project *store.Project
	clients []*store.ClientApplication
	// machines are the memberships of the clients that sign in as
	// themselves.
	machines []*store.ProjectMembership
	users    []*declaredUser
	bots     []*declaredBot
}

// declaredUser is a person: the User is created when no user has the
// email; the membership keeps the id of one made through the admin API.
type declaredUser struct {
	email      string
	membership *store.ProjectMembership // User reference filled when written
}

// declaredBot is a bot record and, when it has a source, its compiled code.
type declaredBot struct {
	name     string
	bot      *store.Bot // without code
	filename string     // "" without a source
	code, js string
	// scope is the bot membership's ("" clears it); keepRunAsUser keeps
	// the store's runAsUser (the config does not say).
	scope         string
	keepRunAsUser bool
}

// checkDeclared builds the configured projects, in a stable order so that
// errors are reproducible, validating every record with the store's own
// checks and compiling every bot; then it tries the write against the store
// as it is now (unique values held by other records, references, the
// transaction's size) in a transaction it discards. It writes nothing.
func (a *App) checkDeclared(ctx context.Context, st *store.Store) (*declared, error) {
	d := new(declared)
	for _, pid := range sortedKeys(a.Projects) {
		p, err := checkProject(ctx, st, a.compiler, pid, a.Projects[pid])
		if err != nil {
			return nil, fmt.Errorf("project %s: %w", pid, err)
		}
		d.projects = append(d.projects, p)
	}
	ws, _, err := planDeclared(ctx, st, d)
	if err != nil {
		return nil, err
	}
	if len(ws) > 0 {
		if err := st.TryAll(ctx, ws); err != nil {
			return nil, declaredWriteError(len(ws), err)
		}
	}
	return d, nil
}

// declaredWriteError explains a refused write of n declared records.
func declaredWriteError(n int, err error) error {
	if errors.Is(err, store.ErrTxnTooBig) {
		return fmt.Errorf("writing the declared records: the %d records that changed do not fit one store transaction; declare fewer records per load (e.g. add the projects in several reloads): %w", n, err)
	}
	return fmt.Errorf("writing the declared records: %w", err)
}

func checkProject(ctx context.Context, st *store.Store, c deploy.Compiler, pid string, p *ProjectConfig) (*declaredProject, error) {
	if p == nil {
		p = new(ProjectConfig)
	}
	proj := &store.Project{Name: p.Name, Egress: p.Egress.record()}
	proj.ID = pid
	proj.Meta.Project = pid // as the store sets it, so an unchanged project compares equal
	if proj.Name == "" {
		proj.Name = pid
	}
	if err := p.Egress.check(); err != nil {
		return nil, err
	}
	if err := st.Validate(proj); err != nil {
		return nil, err
	}
	dp := &declaredProject{project: proj}
	for _, cid := range sortedKeys(p.Clients) {
		c := p.Clients[cid]
		if c == nil {
			c = new(ClientConfig)
		}
		repl := caddy.NewReplacer()
		client := &store.ClientApplication{
			Name:                 cid,
			IdentityProvider:     declaredIdentityProvider(c),
			Secret:               repl.ReplaceKnown(c.Secret, ""),
			RetiringSecret:       repl.ReplaceKnown(c.RetiringSecret, ""),
			JWKSURI:              c.JWKSURI,
			AccessTokenLifetime:  lifetimeString(c.AccessTokenTTL),
			RefreshTokenLifetime: lifetimeString(c.RefreshTokenTTL),
			Scope:                c.Scope,
		}
		client.ID = cid
		client.Meta.Project = pid
		if err := st.Validate(client); err != nil {
			return nil, fmt.Errorf("client %s: %w", cid, err)
		}
		dp.clients = append(dp.clients, client)
		if client.Secret != "" || client.JWKSURI != "" {
			m := machineMembership(pid, cid, c.Admin)
			if err := st.Validate(m); err != nil {
				return nil, fmt.Errorf("client %s: membership: %w", cid, err)
			}
			dp.machines = append(dp.machines, m)
		}
	}
	for _, email := range sortedKeys(p.Users) {
		u, err := checkUser(st, pid, email, p.Users[email])
		if err != nil {
			return nil, fmt.Errorf("user %s: %w", email, err)
		}
		dp.users = append(dp.users, u)
	}
	for _, name := range sortedKeys(p.Bots) {
		b, err := checkBot(ctx, st, c, pid, name, p.Bots[name])
		if err != nil {
			return nil, fmt.Errorf("bot %s: %w", name, err)
		}
		dp.bots = append(dp.bots, b)
	}
	return dp, nil
}

func checkUser(st *store.Store, pid, email string, u *UserConfig) (*declaredUser, error) {
	if u == nil {
		u = new(UserConfig)
	}
	user := &store.User{Email: email}
	user.ID = declaredID("user", store.NormalizeEmail(email))
	if err := st.Validate(user); err != nil {
		return nil, err
	}
	m := &store.ProjectMembership{
		Project:    store.Reference{Reference: "Project/" + pid},
		User:       store.Reference{Reference: "User/" + user.ID},
		ExternalID: u.ExternalID,
		Admin:      u.Admin,
	}
	if u.Profile != "" {
		m.Profile = &store.Reference{Reference: u.Profile}
	}
	m.ID = declaredID("membership", pid, user.ID)
	m.Meta.Project = pid
	if err := st.Validate(m); err != nil {
		return nil, err
	}
	return &declaredUser{email: email, membership: m}, nil
}

func checkBot(ctx context.Context, st *store.Store, c deploy.Compiler, pid, name string, b *BotConfig) (*declaredBot, error) {
	if b == nil {
		b = new(BotConfig)
	}
	if err := checkAuditEventTrigger(b.AuditEventTrigger); err != nil {
		return nil, err
	}
	if err := checkBotRuntime("runtime_version", b.RuntimeVersion); err != nil {
		return nil, err
	}
	if err := checkBotScope(b.Scope); err != nil {
		return nil, err
	}
	if err := checkBotCron(b.Cron); err != nil {
		return nil, err
	}
	bot := &store.Bot{Name: name, AuditEventTrigger: b.AuditEventTrigger, RuntimeVersion: b.RuntimeVersion, CronString: b.Cron}
	if b.RunAsUser != nil {
		bot.RunAsUser = *b.RunAsUser
	}
	bot.ID = declaredID("bot", pid, name)
	bot.Meta.Project = pid
	for _, ident := range b.Identifiers {
		system, value, ok := strings.Cut(ident, "|")
		if !ok {
			system, value = "", ident
		}
		bot.Identifier = append(bot.Identifier, store.Identifier{System: system, Value: value})
	}
	if err := st.Validate(bot); err != nil {
		return nil, err
	}
	// As the store normalizes it, so that an unchanged scope compares equal.
	scope := strings.Join(strings.Fields(b.Scope), " ")
	db := &declaredBot{name: name, bot: bot, scope: scope, keepRunAsUser: b.RunAsUser == nil}
	if scope != "" {
		if err := st.Validate(botMembershipRecord(pid, bot.ID, scope)); err != nil {
			return nil, fmt.Errorf("membership: %w", err)
		}
	}
	if b.Source == "" {
		return db, nil
	}
	code, err := os.ReadFile(b.Source)
	if err != nil {
		return nil, fmt.Errorf("reading source: %w", err)
	}
	js, err := deploy.Compile(ctx, c, pid, b.Source, string(code))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Source, err)
	}
	db.filename, db.code, db.js = b.Source, string(code), js
	// The records of the code must pass the store's checks too.
	records := deploy.NewCode(pid, db.filename, db.code, db.js)
	for _, r := range []store.Resource{records.Source, records.Executable} {
		if err := st.Validate(r); err != nil {
			return nil, fmt.Errorf("code: %w", err)
		}
	}
	return db, nil
}

// declaredWriteAttempts bounds how often writeDeclared plans again when a
// concurrent write (through the admin API) changed a record between the
// plan's reads and its transaction.
const declaredWriteAttempts = 3

// writeDeclared writes the declared records that differ from the store
// (and the signing key a new store needs) in one transaction, then removes
// the code the updated bots no longer point at.
func (a *App) writeDeclared(ctx context.Context, st *store.Store, d *declared, keys []tokens.Key) error {
	var (
		ws      []store.Write
		orphans []string
		err     error
	)
	for attempt := 1; ; attempt++ {
		ws, orphans, err = planDeclared(ctx, st, d)
		if err != nil {
			return err
		}
		for _, k := range keys {
			r, err := oauth.KeyRecord(k)
			if err != nil {
				return fmt.Errorf("signing key: %w", err)
			}
			ws = append(ws, store.Write{Resource: r})
		}
		if len(ws) == 0 {
			return nil
		}
		err = st.PutAll(ctx, ws)
		if !errors.Is(err, store.ErrConflict) || attempt == declaredWriteAttempts {
			break
		}
	}
	if err != nil {
		return declaredWriteError(len(ws), err)
	}
	// The bots no longer refer to their previous code. Removing it is
	// housekeeping: a failure leaves an orphan Binary, not a broken bot.
	for _, id := range orphans {
		_ = st.Delete(ctx, "Binary", id)
	}
	a.logger.Info("declared records written", zap.Int("changed", len(ws)))
	return nil
}

// planDeclared reads the store and returns the writes that bring it to the
// declared content (none for a record that already says the same thing, so
// that reloading an unchanged config does not churn versions), and the
// Binaries of bot code the writes replace.
func planDeclared(ctx context.Context, st *store.Store, d *declared) (ws []store.Write, orphans []string, err error) {
	for _, p := range d.projects {
		pid := p.project.ID
		add := func(r store.Resource) error {
			w, changed, err := upsertWrite(ctx, st, r)
			if changed {
				ws = append(ws, w)
			}
			return err
		}
		if err := add(clone(p.project)); err != nil {
			return nil, nil, fmt.Errorf("project %s: %w", pid, err)
		}
		for _, c := range p.clients {
			c := clone(c)
			if err := keepSecretHashes(ctx, st, c); err != nil {
				return nil, nil, fmt.Errorf("project %s: client %s: %w", pid, c.ID, err)
			}
			if err := add(c); err != nil {
				return nil, nil, fmt.Errorf("project %s: client %s: %w", pid, c.ID, err)
			}
		}
		for _, m := range p.machines {
			if err := planMachine(ctx, st, pid, clone(m), add); err != nil {
				return nil, nil, fmt.Errorf("project %s: client %s: membership: %w", pid, m.User.Reference, err)
			}
		}
		for _, u := range p.users {
			if err := planUser(ctx, st, pid, u, add); err != nil {
				return nil, nil, fmt.Errorf("project %s: user %s: %w", pid, u.email, err)
			}
		}
		for _, b := range p.bots {
			old, err := planBot(ctx, st, pid, b, add)
			if err != nil {
				return nil, nil, fmt.Errorf("project %s: bot %s: %w", pid, b.name, err)
			}
			orphans = append(orphans, old...)
		}
	}
	return ws, orphans, nil
}

func planUser(ctx context.Context, st *store.Store, pid string, u *declaredUser, add func(store.Resource) error) error {
	m := clone(u.membership)
	user, err := st.UserByEmail(ctx, u.email)
	switch {
	case errors.Is(err, store.ErrNotFound):
		user = &store.User{Email: u.email}
		user.ID = declaredID("user", store.NormalizeEmail(u.email))
		if err := add(user); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	m.User = store.Reference{Reference: "User/" + user.ID}
	m.ID = declaredID("membership", pid, user.ID)
	if existing, err := st.MembershipsByProjectUser(ctx, pid, user.ID); err == nil && len(existing) > 0 {
		m.ID = existing[0].ID // keep a membership made through the admin API
	} else if err != nil {
		return err
	}
	return add(m)
}

// planBot adds the bot and, when its source changed, its new code; it
// returns the Binaries of the code replaced.
func planBot(ctx context.Context, st *store.Store, pid string, b *declaredBot, add func(store.Resource) error) ([]string, error) {
	bot := clone(b.bot)
	existing, err := store.Get[store.Bot](ctx, st, bot.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		existing = nil
	case err != nil:
		return nil, err
	default:
		// Keep the deployed code unless the declared source differs.
		bot.SourceCode, bot.ExecutableCode = existing.SourceCode, existing.ExecutableCode
		// Without run_as_user, keep what the store says (a bot declared
		// before bot identity was migrated to run as its caller).
		if b.keepRunAsUser {
			bot.RunAsUser = existing.RunAsUser
		}
	}
	var orphans []string
	if b.filename != "" {
		same := false
		if existing != nil {
			if same, err = deploy.SameSource(ctx, st, existing, b.filename, b.code); err != nil {
				return nil, err
			}
		}
		if !same {
			c := deploy.NewCode(pid, b.filename, b.code, b.js)
			if err := add(c.Source); err != nil {
				return nil, err
			}
			if err := add(c.Executable); err != nil {
				return nil, err
			}
			if existing != nil {
				orphans = deploy.CodeBinaries(existing)
			}
			bot.SourceCode, bot.ExecutableCode = c.SourceCode, c.ExecutableCode
		}
	}
	if err := add(bot); err != nil {
		return nil, err
	}
	if err := planBotMembership(ctx, st, pid, bot.ID, b.scope, add); err != nil {
		return nil, fmt.Errorf("membership: %w", err)
	}
	return orphans, nil
}

// upsertWrite returns the write that stores res, unless the stored record
// already says the same thing (changed false). Replacing is conditional on
// the version read.
func upsertWrite(ctx context.Context, st *store.Store, res store.Resource) (w store.Write, changed bool, err error) {
	b := res.Base()
	typ := store.TypeOf(res)
	old, err := store.NewResource(typ)
	if err != nil {
		return w, false, err
	}
	b.ResourceType = typ
	err = st.Read(ctx, typ, b.ID, old)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Write{Resource: res}, true, nil
	case err != nil:
		return w, false, err
	}
	if sameContent(old, res) {
		return w, false, nil
	}
	return store.Write{Resource: res, IfMatch: old.Base().Meta.VersionID}, true, nil
}

// clone copies a checked record, so that each plan stamps its own copy.
func clone[R any, P interface {
	*R
	store.Resource
}](r P) P {
	data, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("encoding a declared %T: %v", r, err)) // plain structs always encode
	}
	c := P(new(R))
	if err := json.Unmarshal(data, c); err != nil {
		panic(fmt.Sprintf("decoding a declared %T: %v", r, err))
	}
	return c
}

// sameContent compares two records ignoring their version metadata.
func sameContent(a, b store.Resource) bool {
	ja, errA := contentJSON(a)
	jb, errB := contentJSON(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

func contentJSON(r store.Resource) ([]byte, error) {
	saved := r.Base().Meta
	r.Base().Meta.VersionID, r.Base().Meta.LastUpdated = "", ""
	defer func() { r.Base().Meta = saved }()
	return json.Marshal(r)
}

// pendingKeys is the key store of a config being loaded. The first
// signing key of a new store is held in memory until the config starts and
// is written with the declared records, so that provisioning (and `caddy
// validate`) writes nothing; once started, keys are saved directly.
type pendingKeys struct {
	oauth.KeyStore
	mu      sync.Mutex
	started bool
	pending []tokens.Key
}

// Load returns the stored keys and the ones not written yet.
func (k *pendingKeys) Load(ctx context.Context) ([]tokens.Key, error) {
	keys, err := k.KeyStore.Load(ctx)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range k.pending {
		if !slices.ContainsFunc(keys, func(s tokens.Key) bool { return s.ID == p.ID }) {
			keys = append(keys, p)
		}
	}
	return keys, nil
}

// Save keeps key for Start, or stores it once the config has started.
func (k *pendingKeys) Save(ctx context.Context, key tokens.Key) error {
	k.mu.Lock()
	if !k.started {
		k.pending = append(k.pending, key)
		k.mu.Unlock()
		return nil
	}
	k.mu.Unlock()
	return k.KeyStore.Save(ctx, key)
}

// take returns the keys held for Start.
func (k *pendingKeys) take() []tokens.Key {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.pending)
}

// written records that the held keys are stored and later ones are saved
// directly.
func (k *pendingKeys) written() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pending, k.started = nil, true
}

// durationString renders a duration for the store ("" for unset).
func durationString(d caddy.Duration) string {
	if d == 0 {
		return ""
	}
	return time.Duration(d).String()
}

// lifetimeString renders a token lifetime in Medplum's syntax ("3600s").
func lifetimeString(d caddy.Duration) string {
	if d <= 0 {
		return ""
	}
	return strconv.FormatInt(int64(time.Duration(d).Round(time.Second)/time.Second), 10) + "s"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
