package botapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/oauth"
)

// RunTokens issues the access tokens of bot runs (medplum.getAccessToken; *oauth.Server): a
// token acting as id, and the function that revokes it.
type RunTokens interface {
	IssueRunToken(ctx context.Context, id *oauth.Identity, ttl time.Duration) (string, func(context.Context), error)
}

// runTokenPath is where the bot's medplum client asks for its token. It is no FHIR path (those
// start with a resource type, a $operation or nothing), so the gateway answers it and no backend
// sees it.
const runTokenPath = "auth/run-token"

// runTokenMaxTTL bounds a run token's life when the run's own timeout is not known; the run
// revokes its tokens when it ends, so this only matters if the gateway dies mid-run.
const runTokenMaxTTL = 15 * time.Minute

// runTokens are the tokens one run was given, revoked together when it ends.
type runTokens struct {
	ttl time.Duration

	mu      sync.Mutex
	revokes []func(context.Context)
	ended   bool
}

func newRunTokens(timeout time.Duration) *runTokens {
	if timeout <= 0 || timeout > runTokenMaxTTL {
		timeout = runTokenMaxTTL
	}
	return &runTokens{ttl: timeout}
}

// revokeAll ends every token of the run; a token asked for after it is refused.
func (t *runTokens) revokeAll(ctx context.Context) {
	if t == nil {
		return
	}
	t.mu.Lock()
	revokes := t.revokes
	t.revokes, t.ended = nil, true
	t.mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	for _, revoke := range revokes {
		revoke(ctx)
	}
}

// runToken answers the bot's getAccessToken: {"accessToken": …} acting as the run's identity.
func (c medplumClient) runToken(ctx context.Context) (int, string, []byte, error) {
	refuse := func(status int, msg string) (int, string, []byte, error) {
		return status, fhir.ContentType, fhir.MarshalOutcome(status, "medplum.getAccessToken: "+msg), nil
	}
	if c.api.o.RunTokens == nil || c.tokens == nil {
		return refuse(http.StatusNotImplemented, "this gateway does not issue tokens to bot runs")
	}
	c.tokens.mu.Lock()
	ended := c.tokens.ended
	c.tokens.mu.Unlock()
	if ended {
		return refuse(http.StatusBadRequest, "the run has ended")
	}
	token, revoke, err := c.api.o.RunTokens.IssueRunToken(ctx, c.id, c.tokens.ttl)
	if errors.Is(err, oauth.ErrNoSignIn) {
		return refuse(http.StatusBadRequest, "this run is made neither as a signed-in caller nor as a bot, so there is no identity to issue a token for")
	}
	if err != nil {
		return refuse(http.StatusServiceUnavailable, "the token could not be issued")
	}
	c.tokens.mu.Lock()
	if c.tokens.ended {
		c.tokens.mu.Unlock()
		revoke(context.WithoutCancel(ctx))
		return refuse(http.StatusBadRequest, "the run has ended")
	}
	c.tokens.revokes = append(c.tokens.revokes, revoke)
	c.tokens.mu.Unlock()
	body, _ := json.Marshal(map[string]string{"accessToken": token}) // a string: cannot fail
	return http.StatusOK, "application/json", body, nil
}
