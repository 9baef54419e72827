package botrunner

import (
	"sort"
	"strings"

	"github.com/dop251/goja"
)

// Event is what a bot receives as its second argument, in Medplum's BotEvent shape:
// {bot, contentType, input, secrets, traceId, requester, headers}.
type Event struct {
	Bot         Reference         // {reference: "Bot/<id>", display: name}
	ContentType string            // the raw request Content-Type, parameters included; omitted when empty
	Input       Input             // the parsed body (ParseInput)
	Secrets     map[string]Secret // name → project secret, in Medplum's ProjectSetting shape
	TraceID     string            // omitted when empty
	Requester   *Reference        // the caller's profile; omitted when nil
	Headers     map[string]string // request headers, lower-case names; credentials are dropped
}

// Reference is a FHIR Reference.
type Reference struct {
	Reference string `json:"reference"`
	Display   string `json:"display,omitempty"`
}

// Secret is one of Medplum's ProjectSetting entries: a name and exactly one value.
type Secret struct {
	Name         string   `json:"name"`
	ValueString  *string  `json:"valueString,omitempty"`
	ValueBoolean *bool    `json:"valueBoolean,omitempty"`
	ValueInteger *int64   `json:"valueInteger,omitempty"`
	ValueDecimal *float64 `json:"valueDecimal,omitempty"`
}

// credentialHeaders never reach a bot, whatever the caller passes (Medplum hands them over).
var credentialHeaders = map[string]bool{
	"authorization":       true,
	"proxy-authorization": true,
	"cookie":              true,
}

// newEvent builds the handler's second argument directly as JavaScript values; JSON input goes
// through jsonValue, HL7 input becomes an Hl7Message.
func (x *execution) newEvent(ev *Event) *goja.Object {
	rt := x.rt
	obj := rt.NewObject()
	_ = obj.Set("bot", x.reference(ev.Bot))
	if ev.ContentType != "" {
		_ = obj.Set("contentType", ev.ContentType)
	}
	_ = obj.Set("input", x.input(&ev.Input))
	secrets := rt.NewObject()
	names := make([]string, 0, len(ev.Secrets))
	for name := range ev.Secrets {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		setProp(secrets, name, x.secret(name, ev.Secrets[name]))
	}
	_ = obj.Set("secrets", secrets)
	if ev.TraceID != "" {
		_ = obj.Set("traceId", ev.TraceID)
	}
	if ev.Requester != nil {
		_ = obj.Set("requester", x.reference(*ev.Requester))
	}
	_ = obj.Set("headers", x.stringMap(safeHeaders(ev.Headers)))
	return obj
}

func (x *execution) reference(r Reference) *goja.Object {
	obj := x.rt.NewObject()
	_ = obj.Set("reference", r.Reference)
	if r.Display != "" {
		_ = obj.Set("display", r.Display)
	}
	return obj
}

// secret is a ProjectSetting object; a missing name is taken from the map key.
func (x *execution) secret(name string, s Secret) *goja.Object {
	obj := x.rt.NewObject()
	if s.Name != "" {
		name = s.Name
	}
	_ = obj.Set("name", name)
	switch {
	case s.ValueString != nil:
		_ = obj.Set("valueString", *s.ValueString)
	case s.ValueBoolean != nil:
		_ = obj.Set("valueBoolean", *s.ValueBoolean)
	case s.ValueInteger != nil:
		_ = obj.Set("valueInteger", *s.ValueInteger)
	case s.ValueDecimal != nil:
		_ = obj.Set("valueDecimal", *s.ValueDecimal)
	}
	return obj
}

func (x *execution) input(in *Input) goja.Value {
	switch in.Kind {
	case InputText:
		return x.rt.ToValue(in.Text)
	case InputForm:
		return x.stringMap(in.Form)
	case InputHL7:
		if in.HL7 != nil {
			return x.wrapHL7(in.HL7)
		}
		return goja.Null()
	default:
		if len(in.JSON) == 0 {
			return x.rt.NewObject()
		}
		return x.jsonValue(in.JSON)
	}
}

// safeHeaders lower-cases names and drops credentials, copying only when it has to.
func safeHeaders(h map[string]string) map[string]string {
	clean := true
	for k := range h {
		if credentialHeaders[k] || strings.ToLower(k) != k {
			clean = false
			break
		}
	}
	if clean {
		if h == nil {
			return map[string]string{}
		}
		return h
	}
	out := make(map[string]string, len(h))
	for k, v := range h {
		k = strings.ToLower(k)
		if !credentialHeaders[k] {
			out[k] = v
		}
	}
	return out
}
