package store

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
)

// crudCase builds one resource of a type (creating what it depends on) and
// changes it for the replace step.
type crudCase struct {
	name   string
	build  func(t *testing.T, s *Store) Resource
	mutate func(r Resource)
}

func crudCases() []crudCase {
	yes := true
	return []crudCase{
		{
			name:   "Project",
			build:  func(t *testing.T, s *Store) Resource { return &Project{Name: "p", Features: []string{"bots"}} },
			mutate: func(r Resource) { r.(*Project).Description = "changed" },
		},
		{
			name: "ClientApplication",
			build: func(t *testing.T, s *Store) Resource {
				p := seedProject(t, s, "p")
				return &ClientApplication{
					base: Base{Meta: Meta{Project: p.ID}}, Name: "c", AccessTokenLifetime: "1h",
					IdentityProvider: &IdentityProvider{UserInfoURL: "https://idp.example/userinfo", Timeout: "5s", CacheTTL: "1m"},
				}
			},
			mutate: func(r Resource) { r.(*ClientApplication).RefreshTokenLifetime = "30d" },
		},
		{
			name:   "User",
			build:  func(t *testing.T, s *Store) Resource { return &User{Email: "a@example.com", FirstName: "A"} },
			mutate: func(r Resource) { r.(*User).LastName = "B" },
		},
		{
			name: "ProjectMembership",
			build: func(t *testing.T, s *Store) Resource {
				p, u := seedProject(t, s, "p"), seedUser(t, s, "m@example.com")
				return &ProjectMembership{
					Project: Reference{Reference: "Project/" + p.ID}, User: Reference{Reference: "User/" + u.ID},
					Profile: &Reference{Reference: "Practitioner/abc"}, ExternalID: "sub-1",
				}
			},
			mutate: func(r Resource) { r.(*ProjectMembership).Admin = true },
		},
		{
			name: "Bot",
			build: func(t *testing.T, s *Store) Resource {
				p := seedProject(t, s, "p")
				return &Bot{
					base: Base{Meta: Meta{Project: p.ID}}, Name: "b", RuntimeVersion: "awslambda", Timeout: 10,
					Identifier: []Identifier{{System: "https://x", Value: "b1"}},
					SourceCode: &Attachment{ContentType: "text/typescript", URL: "Binary/src-1", Title: "index.ts"},
				}
			},
			mutate: func(r Resource) { r.(*Bot).AuditEventTrigger = "on-error" },
		},
		{
			name: "Binary",
			build: func(t *testing.T, s *Store) Resource {
				return &Binary{ContentType: "text/javascript", Data: "ZXhwb3J0IHt9"}
			},
			mutate: func(r Resource) { r.(*Binary).ContentType = "application/javascript" },
		},
		{
			name: "Login",
			build: func(t *testing.T, s *Store) Resource {
				return &Login{User: Reference{Reference: "User/u1"}, AuthMethod: "exchange", Scope: "openid", Granted: true}
			},
			mutate: func(r Resource) { r.(*Login).Revoked = true },
		},
		{
			name: "AuditEvent",
			build: func(t *testing.T, s *Store) Resource {
				return &AuditEvent{
					Type: Coding{Code: "execute"}, Outcome: "0",
					Entity: []AuditEventEntity{{What: Reference{Reference: "Bot/b1"}}},
					Source: AuditEventSource{Observer: Reference{Reference: "Bot/b1"}},
				}
			},
			mutate: func(r Resource) { r.(*AuditEvent).OutcomeDesc = "ok" },
		},
		{
			name: "JsonWebKey",
			build: func(t *testing.T, s *Store) Resource {
				return &JSONWebKey{Active: true, Alg: "ES256", Kty: "EC", Crv: "P-256", X: "x", Y: "y", D: "d"}
			},
			mutate: func(r Resource) { r.(*JSONWebKey).Active = false; r.(*JSONWebKey).Retired = "2026-01-02T03:04:05Z" },
		},
		{
			name: "AsyncJob",
			build: func(t *testing.T, s *Store) Resource {
				return &AsyncJob{Status: "accepted", Request: "/fhirgate/$backup", Output: map[string]any{"resourceType": "Parameters"}}
			},
			mutate: func(r Resource) { r.(*AsyncJob).Status = "completed" },
		},
		{
			name: "Subscription",
			build: func(t *testing.T, s *Store) Resource {
				p := seedProject(t, s, "p")
				return &Subscription{
					base: Base{Meta: Meta{Project: p.ID}}, Status: "active", Criteria: "Patient?family=Doe",
					Channel:   SubscriptionChannel{Type: "rest-hook", Endpoint: "Bot/b1", Header: []string{"X-A: 1"}},
					Extension: []SubscriptionExtension{{URL: "https://medplum.com/fhir/StructureDefinition/subscription-supported-interaction", ValueCode: "create"}},
					Author:    &SubscriptionAuthor{Profile: "Practitioner/a", Scope: "user/*.rs"},
				}
			},
			mutate: func(r Resource) { r.(*Subscription).Status = "off"; r.(*Subscription).Error = "failed" },
		},
		{
			name:   "ProjectMembershipInactive",
			build:  func(t *testing.T, s *Store) Resource { return buildMembership(t, s, &yes) },
			mutate: func(r Resource) { no := false; r.(*ProjectMembership).Active = &no },
		},
	}
}

func buildMembership(t *testing.T, s *Store, active *bool) *ProjectMembership {
	p, u := seedProject(t, s, "p"), seedUser(t, s, "x@example.com")
	return &ProjectMembership{Project: Reference{Reference: "Project/" + p.ID}, User: Reference{Reference: "User/" + u.ID}, Active: active}
}

func TestCRUDEveryType(t *testing.T) {
	t.Parallel()
	covered := map[string]bool{}
	for _, tc := range crudCases() {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := newTestStore(t)
			r := tc.build(t, s)
			r.Base().ID = "ignored-by-create"
			if err := s.Create(ctx, r, PutOptions{}); err != nil {
				t.Fatalf("Create: %v", err)
			}
			b := r.Base()
			covered[b.ResourceType] = true
			if b.ID == "ignored-by-create" || !ValidID(b.ID) {
				t.Fatalf("Create kept or produced a bad id %q", b.ID)
			}
			if b.Meta.VersionID == "" || b.Meta.LastUpdated == "" {
				t.Fatalf("Create did not stamp meta: %+v", b.Meta)
			}

			got, err := NewResource(b.ResourceType)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Read(ctx, b.ResourceType, b.ID, got); err != nil {
				t.Fatalf("Read: %v", err)
			}
			if toJSON(t, got) != toJSON(t, r) {
				t.Fatalf("Read returned\n%s\nwant\n%s", toJSON(t, got), toJSON(t, r))
			}

			firstVersion := b.Meta.VersionID
			tc.mutate(r)
			created, err := s.Put(ctx, r, PutOptions{IfMatch: firstVersion})
			if err != nil || created {
				t.Fatalf("Put replace = %v, %v; want false, nil", created, err)
			}
			if b.Meta.VersionID == firstVersion {
				t.Fatal("Put did not change versionId")
			}
			got, _ = NewResource(b.ResourceType)
			if err := s.Read(ctx, b.ResourceType, b.ID, got); err != nil {
				t.Fatalf("Read after Put: %v", err)
			}
			if toJSON(t, got) != toJSON(t, r) {
				t.Fatalf("after Put Read returned\n%s\nwant\n%s", toJSON(t, got), toJSON(t, r))
			}

			if err := s.Delete(ctx, b.ResourceType, b.ID); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			wantErrIs(t, s.Read(ctx, b.ResourceType, b.ID, got), ErrNotFound)
			wantErrIs(t, s.Delete(ctx, b.ResourceType, b.ID), ErrNotFound)
		})
	}
	for _, typ := range ResourceTypes() {
		if !covered[typ] {
			t.Errorf("no CRUD case for %s", typ)
		}
	}
}

// TestCreatedIDsAreTimeOrdered pins why ids are version-7 UUIDs: ids made one
// after another sort in creation order, so appended records land at the end
// of the key range (see newID), whether made by Create or CreateAll.
func TestCreatedIDsAreTimeOrdered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	var ids []string
	for range 50 {
		ids = append(ids, mustCreate(t, s, &Login{User: Reference{Reference: "User/u1"}}).ID)
	}
	batch := make([]Resource, 50)
	for i := range batch {
		batch[i] = &AuditEvent{Type: Coding{Code: "execute"}, Outcome: "0"}
	}
	if err := s.CreateAll(ctx, batch, PutOptions{}); err != nil {
		t.Fatalf("CreateAll: %v", err)
	}
	for _, r := range batch {
		ids = append(ids, r.Base().ID)
	}
	for i, id := range ids {
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 {
			t.Fatalf("id %d = %q (version %v, %v); want a version-7 UUID", i, id, u.Version(), err)
		}
		if i > 0 && id <= ids[i-1] {
			t.Fatalf("id %d = %s sorts before or equal to the one created before it, %s", i, id, ids[i-1])
		}
	}
}

func TestPutCreatesWithGivenID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	p := &Project{base: Base{ID: "my-project.1"}, Name: "p"}
	created, err := s.Put(ctx, p, PutOptions{})
	if err != nil || !created {
		t.Fatalf("Put = %v, %v; want true, nil", created, err)
	}
	got, err := Get[Project](ctx, s, "my-project.1")
	if err != nil || got.Name != "p" || got.Meta.Project != "my-project.1" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
}

func TestVersioning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kv, _ := openTestKV(t)
	clock := time.Date(2026, 11, 21, 13, 4, 56, 123456789, time.FixedZone("x", 3600))
	s := New(kv, Options{Now: func() time.Time { return clock }})

	u := seedUser(t, s, "v@example.com")
	if u.Meta.LastUpdated != "2026-11-21T12:04:56.123Z" {
		t.Fatalf("lastUpdated = %q", u.Meta.LastUpdated)
	}
	v1 := u.Meta.VersionID

	tests := []struct {
		name    string
		ifMatch string
		wantErr error
	}{
		{name: "stale versionId is rejected", ifMatch: "not-the-version", wantErr: ErrConflict},
		{name: "current versionId as weak ETag is accepted", ifMatch: `W/"` + v1 + `"`},
		{name: "old versionId after the write is rejected", ifMatch: v1, wantErr: ErrConflict},
		{name: "no If-Match always writes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := u.Meta
			clock = clock.Add(time.Second)
			_, err := s.Put(ctx, u, PutOptions{IfMatch: tc.ifMatch})
			if tc.wantErr != nil {
				wantErrIs(t, err, tc.wantErr)
				if !reflect.DeepEqual(u.Meta, before) {
					t.Fatalf("failed Put changed meta from %+v to %+v", before, u.Meta)
				}
				return
			}
			if err != nil {
				t.Fatalf("Put: %v", err)
			}
			if u.Meta.VersionID == before.VersionID || u.Meta.LastUpdated == before.LastUpdated {
				t.Fatalf("meta not updated: %+v -> %+v", before, u.Meta)
			}
		})
	}

	t.Run("If-Match on a missing resource is a conflict", func(t *testing.T) {
		_, err := s.Put(ctx, &User{base: Base{ID: "nobody"}, Email: "n@example.com"}, PutOptions{IfMatch: "x"})
		wantErrIs(t, err, ErrConflict)
	})
}

func TestReadErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	u := seedUser(t, s, "r@example.com")
	tests := []struct {
		name    string
		typ, id string
		into    Resource
		wantErr error
	}{
		{name: "missing id", typ: "User", id: "missing", into: &User{}, wantErr: ErrNotFound},
		{name: "invalid id", typ: "User", id: "a/b", into: &User{}, wantErr: ErrNotFound},
		{name: "unknown type", typ: "Patient", id: u.ID, into: &User{}, wantErr: ErrUnknownType},
		{name: "foreign Go type", typ: "User", id: u.ID, into: &struct{ base }{}, wantErr: ErrUnknownType},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantErrIs(t, s.Read(ctx, tc.typ, tc.id, tc.into), tc.wantErr)
		})
	}
	t.Run("mismatched target type", func(t *testing.T) {
		if err := s.Read(ctx, "User", u.ID, &Bot{}); err == nil {
			t.Fatal("reading a User into a Bot succeeded")
		}
	})
	t.Run("read zeroes the target first", func(t *testing.T) {
		into := &User{FirstName: "stale"}
		if err := s.Read(ctx, "User", u.ID, into); err != nil || into.FirstName != "" {
			t.Fatalf("Read = %v, FirstName %q", err, into.FirstName)
		}
	})
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	for _, typ := range ResourceTypes() {
		r, err := NewResource(typ)
		if err != nil {
			t.Fatalf("NewResource(%q): %v", typ, err)
		}
		if got := r.Base().ResourceType; got != typ {
			t.Errorf("NewResource(%q).ResourceType = %q", typ, got)
		}
		if got := r.(storable).resourceType(); got != typ {
			t.Errorf("%T.resourceType() = %q, want %q", r, got, typ)
		}
	}
	if _, err := NewResource("Patient"); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("NewResource(Patient) error = %v", err)
	}
}

func TestResourceTypeMismatchIsRejected(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	err := s.Create(context.Background(), &Project{base: Base{ResourceType: "User"}, Name: "p"}, PutOptions{})
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "resourceType" {
		t.Fatalf("error = %v, want a resourceType ValidationError", err)
	}
}

func TestTTLOnlyForEphemeralTypes(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	if err := s.Create(context.Background(), &Project{Name: "p"}, PutOptions{TTL: time.Hour}); err == nil {
		t.Fatal("a Project with a TTL was accepted")
	}
}
