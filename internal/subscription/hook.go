package subscription

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/queue"
	"github.com/fhirgate/fhirgate/internal/subscription/spec"
)

// Watch implements gateway.WriteHook: a write is watched when its project
// has an active Subscription for a type it writes. For a watched delete
// the last version is read now, before the delete goes on.
func (s *Service) Watch(ctx context.Context, w *gateway.Write) gateway.WriteWatch {
	if !spec.IsWrite(w.Method, w.Segments) || w.Identity == nil || w.Identity.ProjectID == "" {
		return nil
	}
	rules, err := s.rules.active(ctx, w.Identity.ProjectID)
	if err != nil {
		// The write goes on; its triggers are lost, and said so.
		s.o.Logger.Error("reading subscriptions for a write; its triggers are lost", zap.Error(err))
		s.o.Observe("lost")
		return nil
	}
	if len(rules) == 0 {
		return nil
	}
	ww := &watch{s: s, w: w, rules: rules, deleted: spec.Deleted{}, matched: map[string][]string{}}
	if len(w.Segments) == 0 {
		watched := false
		for typ, interactions := range spec.BundleTypes(w.Body) {
			watched = watched || watches(rules, typ, interactions...)
		}
		if !watched {
			return nil
		}
		for _, ref := range spec.BundleDeletes(w.Body) {
			typ, _, _ := strings.Cut(ref, "/")
			if watches(rules, typ, spec.Delete) {
				ww.readBeforeDelete(ctx, ref, nil)
			}
		}
		return ww
	}
	typ := w.Segments[0]
	switch w.Method {
	case http.MethodDelete:
		if !watches(rules, typ, spec.Delete) {
			return nil
		}
		if len(w.Segments) == 2 {
			ww.readBeforeDelete(ctx, typ+"/"+w.Segments[1], nil)
		} else {
			q, _ := url.ParseQuery(w.RawQuery)
			ww.readBeforeDelete(ctx, typ, q)
		}
	case http.MethodPost:
		if !watches(rules, typ, spec.Create) {
			return nil
		}
	default:
		if !watches(rules, typ, spec.Create, spec.Update) {
			return nil
		}
	}
	return ww
}

// watch is one watched write.
type watch struct {
	s       *Service
	w       *gateway.Write
	rules   []*spec.Rule
	deleted spec.Deleted
	// matched are, by "Type/id", the delete Subscriptions with parameters
	// that matched the resource before its delete.
	matched map[string][]string
}

// readBeforeDelete reads the resource a delete removes (path "Type/id"),
// or those a conditional delete matches (path "Type" and its query).
func (ww *watch) readBeforeDelete(ctx context.Context, path string, q url.Values) {
	resp, err := ww.w.Backend.Do(ctx, http.MethodGet, path, q, nil, nil)
	if err != nil || resp.Status != http.StatusOK {
		return // nothing to delete, or unreadable: the delete decides
	}
	if q == nil {
		ww.deleted[path] = json.RawMessage(resp.Body)
		ww.matchBeforeDelete(ctx, path)
		return
	}
	var b struct {
		Entry []struct {
			Resource json.RawMessage `json:"resource"`
		} `json:"entry"`
	}
	if json.Unmarshal(resp.Body, &b) != nil {
		return
	}
	for _, e := range b.Entry {
		var r struct {
			ResourceType string `json:"resourceType"`
			ID           string `json:"id"`
		}
		if json.Unmarshal(e.Resource, &r) == nil && r.ResourceType == path && r.ID != "" {
			ww.deleted[path+"/"+r.ID] = e.Resource
			ww.matchBeforeDelete(ctx, path+"/"+r.ID)
		}
	}
}

// matchBeforeDelete evaluates the parameters of the delete Subscriptions
// on the resource ref while it still exists.
func (ww *watch) matchBeforeDelete(ctx context.Context, ref string) {
	typ, id, _ := strings.Cut(ref, "/")
	for _, r := range ww.rules {
		if r.Criteria.Type != typ || r.Criteria.Query == "" || !r.Triggers(spec.Delete) {
			continue
		}
		if ok, err := countMatches(ctx, ww.w.Backend, r, typ, id); err == nil && ok {
			ww.matched[ref] = append(ww.matched[ref], r.ID)
		}
	}
}

// Done implements gateway.WriteWatch: the changes are enqueued before
// the client's answer is written — committed (Options.SyncTriggers: on
// disk).
func (ww *watch) Done(ctx context.Context, resp *gateway.BackendResponse, truncated bool) {
	s := ww.s
	body := resp.Body
	if truncated {
		body = nil // ids come from Location; the job reads the rest
	}
	changes := spec.Changes(spec.Request{Method: ww.w.Method, Segments: ww.w.Segments, Body: ww.w.Body},
		spec.Response{Status: resp.Status, Header: resp.Header, Body: body}, ww.deleted)
	if len(changes) == 0 {
		return
	}
	for i := range changes {
		changes[i].Matched = ww.matched[changes[i].Ref()]
		if len(changes[i].Resource) > maxCarried {
			changes[i].Resource = nil // read again by the job
		}
	}
	id := ww.w.Identity
	args := triggerArgs{
		Route:   uuid.NewString(),
		Project: id.ProjectID,
		Writer:  writerOf(id),
		Changes: changes,
		Depth:   DepthOf(ctx),
		Trace:   ww.w.Header.Get("traceparent"),
		At:      time.Now(),
	}
	raw, err := json.Marshal(args)
	if err == nil {
		_, err = s.o.Queue.Enqueue(context.WithoutCancel(ctx), queue.Job{Kind: TriggerKind, Args: raw, Deferred: !s.o.SyncTriggers})
	}
	if err != nil {
		s.o.Logger.Error("enqueuing subscription triggers; they are lost", zap.Error(err), zap.Int("changes", len(changes)))
		s.o.Observe("lost")
		return
	}
	s.o.Observe("queued")
}

// maxCarried bounds a resource carried in a job; a larger one is read
// again when the job runs.
const maxCarried = 256 << 10
