package caddymodule

import (
	"fmt"
	"time"
)

// medplumRefreshGracePeriod is MedplumClient's default refreshGracePeriod:
// it refreshes a token this long before it expires.
const medplumRefreshGracePeriod = 5 * time.Minute

// minAccessTokenTTL is the shortest access_token_ttl accepted without
// allow_short_access_tokens: the grace period and a minute of use, so a
// default MedplumClient does not see a fresh token as expired and refresh
// in a loop.
const minAccessTokenTTL = medplumRefreshGracePeriod + time.Minute

// checkTokenLifetimes refuses access-token lifetimes that would make a
// default MedplumClient refresh in a loop, unless the operator said the
// clients are configured for them.
func (a *App) checkTokenLifetimes() error {
	if a.AllowShortAccessTokens {
		return nil
	}
	check := func(where string, d time.Duration) error {
		if d > 0 && d < minAccessTokenTTL {
			return fmt.Errorf("%saccess_token_ttl %s is under %s: a MedplumClient refreshes tokens %s before they expire "+
				"(its refreshGracePeriod), so it would refresh in a loop; use at least %s, or set allow_short_access_tokens "+
				"and give the clients a smaller refreshGracePeriod", where, d, minAccessTokenTTL, medplumRefreshGracePeriod, minAccessTokenTTL)
		}
		return nil
	}
	if err := check("", time.Duration(a.AccessTokenTTL)); err != nil {
		return err
	}
	for _, pid := range sortedKeys(a.Projects) {
		p := a.Projects[pid]
		if p == nil {
			continue
		}
		for _, cid := range sortedKeys(p.Clients) {
			if c := p.Clients[cid]; c != nil {
				if err := check(fmt.Sprintf("project %s: client %s: ", pid, cid), time.Duration(c.AccessTokenTTL)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
