package store

import "fmt"

// Subscription is a FHIR R4 Subscription that fhirgate evaluates itself on
// the writes its gate passes (Medplum's rest-hook subscriptions). The store
// checks only the shape; internal/subscription/spec checks the meaning
// (criteria, endpoint, Medplum's extensions) before a write.
type Subscription struct {
	base
	// Status is one of SubscriptionStatuses; only "active" ones are
	// evaluated.
	Status   string              `json:"status"`
	Reason   string              `json:"reason,omitempty"`
	Criteria string              `json:"criteria"`
	End      string              `json:"end,omitempty"`
	Error    string              `json:"error,omitempty"`
	Channel  SubscriptionChannel `json:"channel"`
	// Extension holds Medplum's subscription extensions.
	Extension []SubscriptionExtension `json:"extension,omitempty"`
	// Author is who created or last changed the Subscription, whose read
	// access bounds what it delivers. It is fhirgate's own record, never
	// shown to clients (the services blank it before answering).
	Author *SubscriptionAuthor `json:"_fhirgateAuthor,omitempty"`
}

// SubscriptionChannel is Subscription.channel.
type SubscriptionChannel struct {
	Type     string   `json:"type"`
	Endpoint string   `json:"endpoint,omitempty"`
	Payload  string   `json:"payload,omitempty"`
	Header   []string `json:"header,omitempty"`
}

// SubscriptionExtension is an extension of a Subscription with the value
// types Medplum's subscription extensions use.
type SubscriptionExtension struct {
	URL          string `json:"url"`
	ValueCode    string `json:"valueCode,omitempty"`
	ValueString  string `json:"valueString,omitempty"`
	ValueInteger *int64 `json:"valueInteger,omitempty"`
}

// SubscriptionAuthor is the identity a Subscription was last written with.
type SubscriptionAuthor struct {
	Profile string `json:"profile,omitempty"`
	User    string `json:"user,omitempty"`
	Client  string `json:"client,omitempty"`
	Scope   string `json:"scope,omitempty"`
	Patient string `json:"patient,omitempty"`
}

// SubscriptionStatuses are the values of Subscription.status (FHIR R4).
var SubscriptionStatuses = []string{"requested", "active", "error", "off"}

func (s *Subscription) resourceType() string { return "Subscription" }

func (s *Subscription) validate() error {
	if err := checkProjectID("meta.project", s.Meta.Project, true); err != nil {
		return err
	}
	if err := checkEnum("status", s.Status, SubscriptionStatuses...); err != nil {
		return err
	}
	if err := checkRequired("criteria", s.Criteria); err != nil {
		return err
	}
	if err := checkRequired("channel.type", s.Channel.Type); err != nil {
		return err
	}
	if s.End != "" {
		if err := checkTime("end", s.End); err != nil {
			return err
		}
	}
	for i, e := range s.Extension {
		if err := checkRequired(fmt.Sprintf("extension[%d].url", i), e.URL); err != nil {
			return err
		}
	}
	return nil
}

func (s *Subscription) references() []mustExist {
	return []mustExist{{"meta.project", "Project", s.Meta.Project}}
}
