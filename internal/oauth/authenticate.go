package oauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/fhirstore"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/tokens"
)

// maxBearerBytes bounds the token we are willing to parse. Our tokens are
// well under 2 KiB.
const maxBearerBytes = 8 << 10

// Identity is who a valid bearer token speaks for.
type Identity struct {
	UserID   string
	LoginID  string
	ClientID string
	// Scope is the token's granted scope; empty (a token issued before
	// scopes were granted) means full access.
	Scope string
	// Patient is the token's patient context (a Patient id), if any.
	Patient      string
	Profile      string // e.g. "Practitioner/123"
	ProjectID    string
	MembershipID string
	Admin        bool
}

// AuthError is a refused bearer token: 401, with the RFC 6750 challenge
// to send, or 503 when the token could not be checked because the store
// cannot be reached.
type AuthError struct {
	// Code is "" when no token was sent (RFC 6750 §3.1: no error code then),
	// else "invalid_token" or "invalid_request".
	Code        string
	Description string
	// Reason is a fixed label for metrics.
	Reason string
	// Unavailable marks a token that could not be checked because the
	// store is down: 503 with Retry-After, so that the client keeps its
	// token and tries again.
	Unavailable bool
}

func (e *AuthError) Error() string { return e.Description }

func authErr(reason, description string) *AuthError {
	return &AuthError{Code: errInvalidToken, Description: description, Reason: reason}
}

// Authenticate validates the request's bearer token and returns whom it
// speaks for. The signature check is cached by the tokens package; the
// Login and membership come from the session cache only while neither has
// been written since (here or, through the change feed, on another
// replica), so a revocation or a deactivated membership takes effect on
// the next request.
func (s *Server) Authenticate(ctx context.Context, r *http.Request) (*Identity, *AuthError) {
	raw, e := bearerToken(r)
	if e != nil {
		s.o.OnAuthFailure(e.Reason)
		return nil, e
	}
	claims, err := s.o.Tokens.Verify(ctx, raw, tokens.KindAccess)
	if err != nil {
		reason := string(tokens.ReasonOf(err))
		s.o.OnAuthFailure(reason)
		return nil, authErr(reason, "the access token is invalid: "+describeReason(tokens.ReasonOf(err)))
	}
	login, m, e := s.session(ctx, claims)
	if e != nil {
		s.o.OnAuthFailure(e.Reason)
		return nil, e
	}
	id := &Identity{
		UserID: claims.Subject, LoginID: login.ID, ClientID: claims.ClientID, Scope: claims.Scope, Patient: claims.Patient,
		Profile: claims.Profile, ProjectID: m.Meta.Project, MembershipID: m.ID, Admin: m.Admin,
	}
	if isBotLogin(login) {
		// A bot run's token acts as the run did (botapi's botIdentity): a bot is no user, and
		// its token grants no more than its run had.
		id.UserID, id.Admin = "", false
	}
	return id, nil
}

// session returns the token's Login and membership if they still stand,
// from the session cache when it has them.
func (s *Server) session(ctx context.Context, c *tokens.Claims) (*store.Login, *store.ProjectMembership, *AuthError) {
	login, m, ok := s.sessions.get(s.o.Store, c.LoginID)
	if ok {
		if e := checkLogin(login, c); e != nil {
			return nil, nil, e
		}
		return login, m, nil
	}
	// The counters are read before the records, so a write racing the
	// reads leaves the entry stale rather than wrong.
	stamp := s.o.Store.RecordChanges("Login", c.LoginID)
	login, e := s.liveLogin(ctx, c)
	if e != nil {
		return nil, nil, e
	}
	membershipID := refID(login.Membership.Reference)
	stamp += s.o.Store.RecordChanges("ProjectMembership", membershipID)
	if membershipID == "" && isBotLogin(login) {
		// A bot without a membership runs with its project's full access; so does its token.
		m := &store.ProjectMembership{}
		m.Meta.Project = login.Meta.Project
		s.sessions.put(login, m, stamp)
		return login, m, nil
	}
	m, err := store.Get[store.ProjectMembership](ctx, s.o.Store, membershipID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, nil, storeAuthErr(err)
	}
	if err != nil || !m.IsActive() {
		return nil, nil, authErr("membership", "the access token's membership is no longer active")
	}
	s.sessions.put(login, m, stamp)
	return login, m, nil
}

// liveLogin returns the token's Login if it still stands: it exists, is
// not revoked, belongs to the token's user and client and, for a refresh
// token, the token carries the current refresh secret.
func (s *Server) liveLogin(ctx context.Context, c *tokens.Claims) (*store.Login, *AuthError) {
	login, err := store.Get[store.Login](ctx, s.o.Store, c.LoginID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, authErr("login_gone", "the access token's sign-in has ended")
	case err != nil:
		return nil, storeAuthErr(err)
	}
	if e := checkLogin(login, c); e != nil {
		return nil, e
	}
	return login, nil
}

// checkLogin tells whether the token belongs to this Login and the Login
// still stands: not revoked, same user and client and, for a refresh token,
// the current refresh secret.
func checkLogin(login *store.Login, c *tokens.Claims) *AuthError {
	if login.Revoked {
		return authErr("revoked", "the access token was revoked")
	}
	if c.Kind == tokens.KindAccess && refID(login.User.Reference) != c.Subject {
		return authErr("login_mismatch", "the access token does not match its sign-in")
	}
	if login.Client != nil && refID(login.Client.Reference) != c.ClientID {
		return authErr("login_mismatch", "the access token does not match its sign-in")
	}
	if c.Kind == tokens.KindRefresh &&
		subtle.ConstantTimeCompare([]byte(c.RefreshSecret), []byte(login.RefreshSecret)) != 1 {
		return authErr("refresh_superseded", "the refresh token was superseded")
	}
	return nil
}

// bearerToken extracts the token from "Authorization: Bearer <token>".
func bearerToken(r *http.Request) (string, *AuthError) {
	values := r.Header.Values("Authorization")
	if len(values) == 0 {
		return "", &AuthError{Description: "an access token is required", Reason: "missing"}
	}
	if len(values) > 1 {
		return "", &AuthError{Code: "invalid_request", Description: "more than one Authorization header", Reason: "malformed_header"}
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", &AuthError{Code: "invalid_request", Description: "the Authorization header must use the Bearer scheme", Reason: "malformed_header"}
	}
	token = strings.TrimSpace(token)
	switch {
	case token == "":
		return "", &AuthError{Code: "invalid_request", Description: "the bearer token is empty", Reason: "malformed_header"}
	case len(token) > maxBearerBytes:
		return "", authErr("malformed", "the access token is too long")
	}
	return token, nil
}

func describeReason(r tokens.Reason) string {
	switch r {
	case tokens.ReasonExpired:
		return "expired"
	case tokens.ReasonNotYetValid:
		return "not yet valid"
	case tokens.ReasonIssuer:
		return "issued by someone else"
	case tokens.ReasonType:
		return "not an access token"
	case tokens.ReasonAlgorithm, tokens.ReasonUnknownKey, tokens.ReasonSignature:
		return "signature not trusted"
	default:
		return "malformed"
	}
}

// storeAuthErr is a token that could not be checked for a store error.
func storeAuthErr(err error) *AuthError {
	e := authErr("store", "the access token could not be checked")
	if errors.Is(err, store.ErrUnwritable) {
		e.Reason, e.Unavailable = "store_unavailable", true
		e.Description = "the access token could not be checked: the store cannot be reached right now"
	}
	return e
}

// WriteAuthError answers a refused bearer token: 401 with the RFC 6750
// challenge and an OperationOutcome body, or 503 with Retry-After for a
// token that could not be checked.
func WriteAuthError(w http.ResponseWriter, e *AuthError) {
	if e.Unavailable {
		w.Header().Set("Retry-After", fhirstore.UnwritableRetryAfter)
		fhir.WriteOutcome(w, http.StatusServiceUnavailable, e.Description)
		return
	}
	challenge := `Bearer realm="fhirgate"`
	if e.Code != "" {
		challenge += `, error="` + e.Code + `", error_description="` + strings.ReplaceAll(e.Description, `"`, "'") + `"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	fhir.WriteOutcome(w, http.StatusUnauthorized, e.Description)
}
