package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ExtensionBase is where fhirgate's extensions are defined: an extension's
// URL is this base and its name.
const ExtensionBase = "https://fhirgate.dev/fhir/StructureDefinition/"

// The extensions that carry fhirgate's Bot settings, which Medplum's Bot
// has no element for, so that a Bot read from fhirgate is a valid Medplum
// Bot.
const (
	// BotSecretURL is one of the bot's secrets: a complex extension with
	// a "name" (valueString) and a "value" (valueString, valueBoolean,
	// valueDecimal or valueInteger).
	BotSecretURL = ExtensionBase + "bot-secret"
	// BotMaxConcurrentURL is Bot.MaxConcurrent, as valueInteger.
	BotMaxConcurrentURL = ExtensionBase + "bot-max-concurrent"
)

// botAlias has Bot's fields without its methods, so encoding it does not
// recurse into Bot's MarshalJSON and UnmarshalJSON.
type botAlias Bot

// botWire is a Bot's JSON form. Its fields shadow the embedded Bot's of
// the same JSON name.
type botWire struct {
	*botAlias
	Meta      botMeta           `json:"meta"`
	Extension []json.RawMessage `json:"extension,omitempty"`
	// The names fhirgate's settings had before they became extensions,
	// read from bots stored then (and accepted from clients); never
	// written.
	Secret        []ProjectSetting `json:"secret,omitempty"`
	MaxConcurrent int              `json:"maxConcurrent,omitempty"`
}

// botMeta is Meta plus the elements Medplum's server sets on a resource's
// meta: a Bot exported from Medplum has them. They say who wrote it and
// where it belongs there, which means nothing here, so they are accepted
// and dropped.
type botMeta struct {
	Meta
	Author      json.RawMessage `json:"author,omitempty"`
	Account     json.RawMessage `json:"account,omitempty"`
	Accounts    json.RawMessage `json:"accounts,omitempty"`
	Compartment json.RawMessage `json:"compartment,omitempty"`
	OnBehalfOf  json.RawMessage `json:"onBehalfOf,omitempty"`
}

// extValue is an extension with the value types fhirgate's Bot
// extensions use.
type extValue struct {
	URL          string     `json:"url"`
	ValueString  *string    `json:"valueString,omitempty"`
	ValueBoolean *bool      `json:"valueBoolean,omitempty"`
	ValueDecimal *float64   `json:"valueDecimal,omitempty"`
	ValueInteger *int64     `json:"valueInteger,omitempty"`
	Extension    []extValue `json:"extension,omitempty"`
}

// MarshalJSON writes the bot in Medplum's shape: fhirgate's settings
// become extensions after the bot's own.
func (b Bot) MarshalJSON() ([]byte, error) {
	w := botWire{botAlias: (*botAlias)(&b), Meta: botMeta{Meta: b.Meta}}
	w.Extension = append(w.Extension, b.Extension...)
	for _, s := range b.Secret {
		raw, err := json.Marshal(secretExtension(s))
		if err != nil {
			return nil, err
		}
		w.Extension = append(w.Extension, raw)
	}
	if b.MaxConcurrent != 0 {
		n := int64(b.MaxConcurrent)
		raw, err := json.Marshal(extValue{URL: BotMaxConcurrentURL, ValueInteger: &n})
		if err != nil {
			return nil, err
		}
		w.Extension = append(w.Extension, raw)
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a bot, unknown elements ignored (a stored bot);
// [DecodeBot] refuses them (a client's).
func (b *Bot) UnmarshalJSON(data []byte) error { return b.decode(data, false) }

// DecodeBot reads a Bot sent by a client: every element of Medplum's Bot,
// fhirgate's extensions, and the old names of fhirgate's settings; any
// other element is an error naming it.
func DecodeBot(data []byte) (*Bot, error) {
	b := new(Bot)
	if err := b.DecodeStrict(data); err != nil {
		return nil, err
	}
	return b, nil
}

// StrictDecoder is a resource whose JSON form differs from its fields'
// (Bot): DecodeStrict reads a client's JSON into it, refusing unknown
// elements, where json.Decoder's DisallowUnknownFields cannot see them.
type StrictDecoder interface {
	DecodeStrict(data []byte) error
}

// DecodeStrict implements StrictDecoder (see DecodeBot).
func (b *Bot) DecodeStrict(data []byte) error { return b.decode(data, true) }

func (b *Bot) decode(data []byte, strict bool) error {
	*b = Bot{}
	w := botWire{botAlias: (*botAlias)(b)}
	dec := json.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(&w); err != nil {
		return err
	}
	if strict {
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return errors.New("data after the Bot's JSON object")
		}
	}
	b.Meta = w.Meta.Meta
	b.Secret, b.MaxConcurrent = w.Secret, w.MaxConcurrent
	for i, raw := range w.Extension {
		var x extValue
		if err := json.Unmarshal(raw, &x); err != nil {
			// Another kind of extension; checkExtensions reports it if
			// it is not one.
			b.Extension = append(b.Extension, raw)
			continue
		}
		switch x.URL {
		case BotSecretURL:
			s, err := secretFromExtension(x)
			if err != nil {
				return invalid(fmt.Sprintf("extension[%d]", i), err.Error())
			}
			b.Secret = append(b.Secret, s)
		case BotMaxConcurrentURL:
			if x.ValueInteger == nil {
				return invalid(fmt.Sprintf("extension[%d]", i), BotMaxConcurrentURL+" needs a valueInteger")
			}
			b.MaxConcurrent = int(min(max(*x.ValueInteger, -1), MaxBotConcurrency+1))
		default:
			b.Extension = append(b.Extension, raw)
		}
	}
	return nil
}

func secretExtension(s ProjectSetting) extValue {
	name := s.Name
	x := extValue{URL: BotSecretURL, Extension: []extValue{{URL: "name", ValueString: &name}}}
	v := extValue{URL: "value", ValueBoolean: s.ValueBoolean, ValueDecimal: s.ValueDecimal, ValueInteger: s.ValueInteger}
	if s.ValueString != "" {
		str := s.ValueString
		v.ValueString = &str
	}
	if v.ValueString != nil || v.ValueBoolean != nil || v.ValueDecimal != nil || v.ValueInteger != nil {
		x.Extension = append(x.Extension, v)
	}
	return x
}

func secretFromExtension(x extValue) (ProjectSetting, error) {
	var s ProjectSetting
	for _, sub := range x.Extension {
		switch sub.URL {
		case "name":
			if sub.ValueString == nil {
				return s, errors.New(BotSecretURL + ": name needs a valueString")
			}
			s.Name = *sub.ValueString
		case "value":
			if sub.ValueString != nil {
				s.ValueString = *sub.ValueString
			}
			s.ValueBoolean, s.ValueDecimal, s.ValueInteger = sub.ValueBoolean, sub.ValueDecimal, sub.ValueInteger
		default:
			return s, fmt.Errorf("%s: unknown part %q; it has name and value", BotSecretURL, sub.URL)
		}
	}
	return s, nil
}

// checkExtensions checks that each of a resource's extensions is an
// object with a url, as FHIR requires; their content is kept as sent.
func checkExtensions(field string, exts []json.RawMessage) error {
	for i, raw := range exts {
		var x struct {
			URL string `json:"url"`
		}
		if err := json.Unmarshal(raw, &x); err != nil || x.URL == "" {
			return invalid(fmt.Sprintf("%s[%d]", field, i), "an extension is an object with a url")
		}
	}
	return nil
}
