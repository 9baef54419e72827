package store

// Login is one authentication session: the grant behind an access token and
// its refresh token. It is normally written with a TTL.
type Login struct {
	base
	// User is the User who signed in or, for a machine sign-in
	// (client_credentials), the ClientApplication itself; for the token of
	// a bot run made as the bot itself (medplum.getAccessToken), the Bot.
	User       Reference  `json:"user"`
	Membership Reference  `json:"membership,omitzero"`
	Client     *Reference `json:"client,omitempty"`
	Project    *Reference `json:"project,omitempty"`
	Profile    *Reference `json:"profile,omitempty"`
	AuthMethod string     `json:"authMethod,omitempty"`
	// AuthTime is RFC 3339.
	AuthTime string `json:"authTime,omitempty"`
	Scope    string `json:"scope,omitempty"`
	Nonce    string `json:"nonce,omitempty"`
	Revoked  bool   `json:"revoked,omitempty"`
	Granted  bool   `json:"granted,omitempty"`
	// RefreshSecret is the current refresh-token secret; RefreshGeneration
	// counts rotations so a replayed old refresh token can be detected.
	RefreshSecret     string `json:"refreshSecret,omitempty"`
	RefreshGeneration int    `json:"refreshGeneration,omitempty"`
	RemoteAddress     string `json:"remoteAddress,omitempty"`
	UserAgent         string `json:"userAgent,omitempty"`
}

func (l *Login) resourceType() string { return "Login" }

func (l *Login) allowsTTL() bool { return true }

// UserID returns the id part of the User reference ("" if malformed).
func (l *Login) UserID() string { return refID(l.User.Reference, "User") }

func (l *Login) validate() error {
	if _, _, err := checkReference("user.reference", l.User.Reference, "User", "ClientApplication", "Bot"); err != nil {
		return err
	}
	if l.Membership.Reference != "" {
		if _, _, err := checkReference("membership.reference", l.Membership.Reference, "ProjectMembership"); err != nil {
			return err
		}
	}
	if err := checkOptionalReference("client", l.Client, "ClientApplication"); err != nil {
		return err
	}
	if err := checkOptionalReference("project", l.Project, "Project"); err != nil {
		return err
	}
	if err := checkOptionalReference("profile", l.Profile, profileTypes...); err != nil {
		return err
	}
	if err := checkTime("authTime", l.AuthTime); err != nil {
		return err
	}
	if l.RefreshGeneration < 0 {
		return invalid("refreshGeneration", "must not be negative")
	}
	return nil
}

func (l *Login) indexes() []indexEntry {
	return []indexEntry{{key: indexKey(idxLoginUser, l.ID, principalOf(l.User.Reference))}}
}

// JSONWebKey is a token-signing key (resource type "JsonWebKey"). D is the
// private key and must never leave the server.
type JSONWebKey struct {
	base
	Active bool   `json:"active"`
	Alg    string `json:"alg"`
	Kty    string `json:"kty"`
	Crv    string `json:"crv,omitempty"`
	X      string `json:"x,omitempty"`
	Y      string `json:"y,omitempty"`
	D      string `json:"d,omitempty"`
	Use    string `json:"use,omitempty"`
	// Created is the RFC 3339 time the key was generated; the newest
	// active key signs.
	Created string `json:"created,omitempty"`
	// Retired is the RFC 3339 time the key stopped signing; it is still
	// published for verification for a while after that.
	Retired string `json:"retired,omitempty"`
}

func (k *JSONWebKey) resourceType() string { return "JsonWebKey" }

func (k *JSONWebKey) validate() error {
	if err := checkRequired("alg", k.Alg); err != nil {
		return err
	}
	if err := checkRequired("kty", k.Kty); err != nil {
		return err
	}
	if k.Use != "" {
		if err := checkEnum("use", k.Use, "sig", "enc"); err != nil {
			return err
		}
	}
	if err := checkTime("created", k.Created); err != nil {
		return err
	}
	return checkTime("retired", k.Retired)
}

// AsyncJob tracks a long-running operation (FHIR asynchronous request
// pattern). It may be written with a TTL.
type AsyncJob struct {
	base
	// Status is accepted, active, completed, error or cancelled.
	Status          string `json:"status"`
	Request         string `json:"request"`
	RequestTime     string `json:"requestTime,omitempty"`
	TransactionTime string `json:"transactionTime,omitempty"`
	// Output is a FHIR Parameters resource.
	Output map[string]any `json:"output,omitempty"`
	// Owner is the User who started the job (a fhirgate field, not
	// Medplum's). Only that user and the project's admins may read the job;
	// a job without one (stored before owners were recorded) is readable by
	// the project's admins only.
	Owner *Reference `json:"owner,omitempty"`
}

func (j *AsyncJob) resourceType() string { return "AsyncJob" }

func (j *AsyncJob) allowsTTL() bool { return true }

func (j *AsyncJob) validate() error {
	if err := checkProjectID("meta.project", j.Meta.Project, false); err != nil {
		return err
	}
	if err := checkEnum("status", j.Status, "accepted", "active", "completed", "error", "cancelled"); err != nil {
		return err
	}
	if err := checkRequired("request", j.Request); err != nil {
		return err
	}
	if err := checkTime("requestTime", j.RequestTime); err != nil {
		return err
	}
	if err := checkTime("transactionTime", j.TransactionTime); err != nil {
		return err
	}
	return checkOptionalReference("owner", j.Owner, "User")
}

func (j *AsyncJob) references() []mustExist {
	if j.Meta.Project == "" {
		return nil
	}
	return []mustExist{{"meta.project", "Project", j.Meta.Project}}
}
