package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/deploy"
	"github.com/fhirgate/fhirgate/internal/store"
)

// declaredIDs derives stable ids for declared records that have no natural
// id, so that applying the same config twice updates rather than duplicates.
var declaredIDs = uuid.MustParse("6f1c8e0a-6a51-4f43-9b0e-5d0c1f6e2b7a")

func declaredID(parts ...string) string {
	return uuid.NewSHA1(declaredIDs, []byte(strings.Join(parts, "\x00"))).String()
}

// applyDeclared upserts the configured projects, in a stable order so that
// errors and logs are reproducible.
func (a *App) applyDeclared(ctx context.Context) error {
	st := a.store.store
	for _, pid := range sortedKeys(a.Projects) {
		p := a.Projects[pid]
		if err := a.applyProject(ctx, st, pid, p); err != nil {
			return fmt.Errorf("project %s: %w", pid, err)
		}
	}
	return nil
}

func (a *App) applyProject(ctx context.Context, st *store.Store, pid string, p *ProjectConfig) error {
	proj := &store.Project{Name: p.Name}
	proj.ID = pid
	if proj.Name == "" {
		proj.Name = pid
	}
	if err := upsert(ctx, st, proj); err != nil {
		return err
	}
	for _, cid := range sortedKeys(p.Clients) {
		c := p.Clients[cid]
		client := &store.ClientApplication{
			Name: cid,
			IdentityProvider: &store.IdentityProvider{
				UserInfoURL:          c.UserinfoURL,
				UseSubject:           c.UseSubject,
				AllowUnverifiedEmail: c.AllowUnverifiedEmail,
				Timeout:              durationString(c.Timeout),
				CacheTTL:             durationString(c.CacheTTL),
			},
			Secret:               caddy.NewReplacer().ReplaceKnown(c.Secret, ""),
			AccessTokenLifetime:  lifetimeString(c.AccessTokenTTL),
			RefreshTokenLifetime: lifetimeString(c.RefreshTokenTTL),
		}
		client.ID = cid
		client.Meta.Project = pid
		if err := upsert(ctx, st, client); err != nil {
			return fmt.Errorf("client %s: %w", cid, err)
		}
	}
	for _, email := range sortedKeys(p.Users) {
		if err := applyUser(ctx, st, pid, email, p.Users[email]); err != nil {
			return fmt.Errorf("user %s: %w", email, err)
		}
	}
	for _, name := range sortedKeys(p.Bots) {
		if err := a.applyBot(ctx, st, pid, name, p.Bots[name]); err != nil {
			return fmt.Errorf("bot %s: %w", name, err)
		}
	}
	return nil
}

func applyUser(ctx context.Context, st *store.Store, pid, email string, u *UserConfig) error {
	user, err := st.UserByEmail(ctx, email)
	switch {
	case errors.Is(err, store.ErrNotFound):
		user = &store.User{Email: email}
		user.ID = declaredID("user", store.NormalizeEmail(email))
		if _, err := st.Put(ctx, user, store.PutOptions{}); err != nil {
			return err
		}
	case err != nil:
		return err
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
	if existing, err := st.MembershipsByProjectUser(ctx, pid, user.ID); err == nil && len(existing) > 0 {
		m.ID = existing[0].ID // keep a membership made through the admin API
	} else if err != nil {
		return err
	}
	m.Meta.Project = pid
	return upsert(ctx, st, m)
}

func (a *App) applyBot(ctx context.Context, st *store.Store, pid, name string, b *BotConfig) error {
	if err := checkAuditEventTrigger(b.AuditEventTrigger); err != nil {
		return err
	}
	bot := &store.Bot{Name: name, AuditEventTrigger: b.AuditEventTrigger}
	bot.ID = declaredID("bot", pid, name)
	bot.Meta.Project = pid
	for _, ident := range b.Identifiers {
		system, value, ok := strings.Cut(ident, "|")
		if !ok {
			system, value = "", ident
		}
		bot.Identifier = append(bot.Identifier, store.Identifier{System: system, Value: value})
	}
	// Keep the deployed code: upsert compares everything else.
	var existing store.Bot
	if err := st.Read(ctx, "Bot", bot.ID, &existing); err == nil {
		bot.SourceCode, bot.ExecutableCode = existing.SourceCode, existing.ExecutableCode
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if err := upsert(ctx, st, bot); err != nil {
		return err
	}
	if b.Source == "" {
		return nil
	}
	code, err := os.ReadFile(b.Source)
	if err != nil {
		return fmt.Errorf("reading source: %w", err)
	}
	if _, err := deploy.Deploy(ctx, st, a.compiler, bot.ID, filepath.Base(b.Source), string(code)); err != nil {
		return err
	}
	a.logger.Debug("declared bot ready", zap.String("project", pid), zap.String("bot", name), zap.String("id", bot.ID))
	return nil
}

// upsert writes res unless the stored record already says the same thing,
// so that reloading an unchanged config does not churn versions.
func upsert(ctx context.Context, st *store.Store, res store.Resource) error {
	b := res.Base()
	typ := store.TypeOf(res)
	old, err := store.NewResource(typ)
	if err != nil {
		return err
	}
	b.ResourceType = typ
	err = st.Read(ctx, typ, b.ID, old)
	switch {
	case errors.Is(err, store.ErrNotFound):
		_, err = st.Put(ctx, res, store.PutOptions{})
		return err
	case err != nil:
		return err
	}
	if sameContent(old, res) {
		*b = *old.Base()
		return nil
	}
	_, err = st.Put(ctx, res, store.PutOptions{IfMatch: old.Base().Meta.VersionID})
	return err
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
