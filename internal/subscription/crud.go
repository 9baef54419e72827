package subscription

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/fhirstore"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/subscription/spec"
)

// maxSubscriptionBody bounds a Subscription request body.
const maxSubscriptionBody = 1 << 20

// Handler returns the handler of a Subscription request (every path
// under {fhir_base}/Subscription is fhirgate's: the backend never sees
// them), or nil for any other path. Project admins manage them, as bots;
// another project's Subscription is a 404.
func (s *Service) Handler(t gateway.Target) gateway.Operation {
	if !t.Under || t.Type != "Subscription" {
		return nil
	}
	seg := t.Segments
	return func(w http.ResponseWriter, r *http.Request, id *oauth.Identity, _ *gateway.Backend) {
		if !id.Admin {
			fhir.WriteOutcome(w, http.StatusForbidden, "managing subscriptions requires a project admin")
			return
		}
		switch {
		case len(seg) == 1:
			s.serveType(w, r, id, t.Base)
		case len(seg) == 2 && t.ID != "" && t.Operation == "":
			s.serveInstance(w, r, id, t.ID)
		case len(seg) == 3 && seg[2] == "_history" && r.Method == http.MethodGet:
			s.serveHistory(w, r, id, t.Base, t.ID)
		case len(seg) == 4 && seg[2] == "_history" && r.Method == http.MethodGet:
			sub, ok := s.own(w, r, id, t.ID)
			if !ok {
				return
			}
			if sub.Meta.VersionID != seg[3] {
				fhir.WriteOutcome(w, http.StatusNotFound, fmt.Sprintf("Subscription/%s/_history/%s not found: fhirgate keeps the current version only", t.ID, seg[3]))
				return
			}
			writeSubscription(w, http.StatusOK, sub)
		default:
			fhir.WriteOutcome(w, http.StatusNotFound, "fhirgate supports Subscription read, search, create, update, delete and _history")
		}
	}
}

func (s *Service) serveType(w http.ResponseWriter, r *http.Request, id *oauth.Identity, base string) {
	switch r.Method {
	case http.MethodGet:
		s.search(w, r, id, base)
	case http.MethodPost:
		sub, ok := s.readSubscription(w, r, id)
		if !ok {
			return
		}
		sub.ID = ""
		if err := s.o.Store.Create(r.Context(), sub, store.PutOptions{}); err != nil {
			s.writeStoreError(w, err)
			return
		}
		w.Header().Set("Location", base+"/Subscription/"+sub.ID+"/_history/"+sub.Meta.VersionID)
		writeSubscription(w, http.StatusCreated, sub)
	default:
		w.Header().Set("Allow", "GET, POST")
		fhir.WriteOutcome(w, http.StatusMethodNotAllowed, "use GET to search subscriptions or POST to create one")
	}
}

func (s *Service) serveInstance(w http.ResponseWriter, r *http.Request, id *oauth.Identity, subID string) {
	existing, ok := s.own(w, r, id, subID)
	if !ok {
		return
	}
	switch r.Method {
	case http.MethodGet:
		writeSubscription(w, http.StatusOK, existing)
	case http.MethodPut:
		sub, ok := s.readSubscription(w, r, id)
		if !ok {
			return
		}
		if sub.ID != "" && sub.ID != subID {
			fhir.WriteOutcome(w, http.StatusBadRequest, fmt.Sprintf("the body's id %q differs from the URL's %q", sub.ID, subID), "id")
			return
		}
		sub.ID = subID
		ifMatch := strings.Trim(strings.TrimPrefix(r.Header.Get("If-Match"), "W/"), `"`)
		if _, err := s.o.Store.Put(r.Context(), sub, store.PutOptions{IfMatch: ifMatch}); err != nil {
			s.writeStoreError(w, err)
			return
		}
		writeSubscription(w, http.StatusOK, sub)
	case http.MethodDelete:
		if err := s.o.Store.Delete(r.Context(), "Subscription", subID); err != nil {
			s.writeStoreError(w, err)
			return
		}
		fhir.WriteJSON(w, http.StatusOK, fhir.AllOK())
	default:
		w.Header().Set("Allow", "GET, PUT, DELETE")
		fhir.WriteOutcome(w, http.StatusMethodNotAllowed, "use GET, PUT or DELETE on a subscription")
	}
}

// serveHistory answers a Subscription's history: fhirgate keeps the
// current version only, so it is the one entry.
func (s *Service) serveHistory(w http.ResponseWriter, r *http.Request, id *oauth.Identity, base, subID string) {
	sub, ok := s.own(w, r, id, subID)
	if !ok {
		return
	}
	sub.Author = nil
	b := fhir.NewSearchBundle([]*store.Subscription{sub})
	b.Type = "history"
	b.Entry[0].FullURL = fhirstore.BaseURL(r) + base + "/Subscription/" + sub.ID
	fhir.WriteJSON(w, http.StatusOK, b)
}

func (s *Service) search(w http.ResponseWriter, r *http.Request, id *oauth.Identity, base string) {
	var status, criteria string
	for key, values := range r.URL.Query() {
		if len(values) != 1 {
			fhir.WriteOutcome(w, http.StatusBadRequest, fmt.Sprintf("search parameter %q given more than once", key), key)
			return
		}
		switch key {
		case "status":
			status = values[0]
		case "criteria":
			criteria = values[0]
		case "_count", "_sort", "_total", "_summary":
			// Accepted and ignored: results are few and ordered by id.
		default:
			fhir.WriteOutcome(w, http.StatusBadRequest, fmt.Sprintf("unsupported Subscription search parameter %q; supported: status, criteria", key), key)
			return
		}
	}
	all, err := store.Search[store.Subscription](r.Context(), s.o.Store, store.Filter{Project: id.ProjectID})
	if err != nil {
		s.writeStoreError(w, err)
		return
	}
	subs := all[:0]
	for _, sub := range all {
		if (status == "" || sub.Status == status) && (criteria == "" || sub.Criteria == criteria) {
			sub.Author = nil
			subs = append(subs, sub)
		}
	}
	fhirstore.WriteSearchset(w, r, base, subs)
}

// own loads a Subscription of the caller's project, answering 404 otherwise.
func (s *Service) own(w http.ResponseWriter, r *http.Request, id *oauth.Identity, subID string) (*store.Subscription, bool) {
	return fhirstore.GetOwned[store.Subscription](r.Context(), w, s.o.Store, id.ProjectID, "Subscription", subID, s.o.Logger, subscriptionStoreOperation)
}

// readSubscription reads and checks a body: unknown fields, and anything
// fhirgate would not deliver as asked, are a 400 naming it. The writer
// becomes its author.
func (s *Service) readSubscription(w http.ResponseWriter, r *http.Request, id *oauth.Identity) (*store.Subscription, bool) {
	body, ok := fhirstore.ReadJSONBody(w, r, maxSubscriptionBody)
	if !ok {
		return nil, false
	}
	sub := new(store.Subscription)
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(sub); err != nil {
		fhir.WriteOutcome(w, http.StatusBadRequest, "the body is not a Subscription fhirgate supports: "+err.Error())
		return nil, false
	}
	if sub.ResourceType != "Subscription" {
		fhir.WriteOutcome(w, http.StatusBadRequest, fmt.Sprintf("resourceType is %q, expected Subscription", sub.ResourceType), "resourceType")
		return nil, false
	}
	if sub.Status == "requested" {
		sub.Status = "active" // a server that accepts it activates it
	}
	rule, err := spec.Compile(sub)
	if err != nil {
		var se *spec.Error
		if errors.As(err, &se) {
			fhir.WriteOutcome(w, http.StatusBadRequest, se.Error(), se.Field)
		} else {
			fhir.WriteOutcome(w, http.StatusBadRequest, err.Error())
		}
		return nil, false
	}
	if rule.Endpoint.Bot != "" {
		if _, err := store.GetInProject[store.Bot](r.Context(), s.o.Store, id.ProjectID, rule.Endpoint.Bot); err != nil {
			fhir.WriteOutcome(w, http.StatusBadRequest, fmt.Sprintf("channel.endpoint: Bot/%s is not a bot of this project", rule.Endpoint.Bot), "channel.endpoint")
			return nil, false
		}
	}
	sub.Meta = store.Meta{Project: id.ProjectID}
	sub.Author = &store.SubscriptionAuthor{Profile: id.Profile, User: id.UserID, Client: id.ClientID, Scope: id.Scope, Patient: id.Patient}
	return sub, true
}

// writeSubscription answers a Subscription without fhirgate's own record
// of its author.
func writeSubscription(w http.ResponseWriter, status int, sub *store.Subscription) {
	out := *sub
	out.Author = nil
	fhirstore.WriteResource(w, status, &out)
}

// subscriptionStoreOperation names a failed store call in the log.
const subscriptionStoreOperation = "subscription store operation"

func (s *Service) writeStoreError(w http.ResponseWriter, err error) {
	fhirstore.WriteError(w, err, s.o.Logger, subscriptionStoreOperation)
}
