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
// through jsonValue, HL7 input becomes an Hl7Message. Its objects are dataObjects, so what a warm
// instance's module did to Object.prototype cannot hide or intercept a field of the next run's
// event.
func (x *execution) newEvent(ev *Event) *goja.Object {
	rt := x.rt
	obj := x.newDataObject()
	obj.add("bot", x.reference(ev.Bot))
	if ev.ContentType != "" {
		obj.add("contentType", rt.ToValue(ev.ContentType))
	}
	obj.add("input", x.input(&ev.Input))
	secrets := x.newDataObject()
	names := make([]string, 0, len(ev.Secrets))
	for name := range ev.Secrets {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		secrets.add(name, x.secret(name, ev.Secrets[name]))
	}
	obj.add("secrets", secrets.done(x))
	if ev.TraceID != "" {
		obj.add("traceId", rt.ToValue(ev.TraceID))
	}
	if ev.Requester != nil {
		obj.add("requester", x.reference(*ev.Requester))
	}
	obj.add("headers", x.stringMap(safeHeaders(ev.Headers)))
	return obj.done(x)
}

func (x *execution) reference(r Reference) *goja.Object {
	obj := x.newDataObject()
	obj.add("reference", x.rt.ToValue(r.Reference))
	if r.Display != "" {
		obj.add("display", x.rt.ToValue(r.Display))
	}
	return obj.done(x)
}

// secret is a ProjectSetting object; a missing name is taken from the map key.
func (x *execution) secret(name string, s Secret) *goja.Object {
	obj := x.newDataObject()
	if s.Name != "" {
		name = s.Name
	}
	obj.add("name", x.rt.ToValue(name))
	switch {
	case s.ValueString != nil:
		obj.add("valueString", x.rt.ToValue(*s.ValueString))
	case s.ValueBoolean != nil:
		obj.add("valueBoolean", x.rt.ToValue(*s.ValueBoolean))
	case s.ValueInteger != nil:
		obj.add("valueInteger", x.rt.ToValue(*s.ValueInteger))
	case s.ValueDecimal != nil:
		obj.add("valueDecimal", x.rt.ToValue(*s.ValueDecimal))
	}
	return obj.done(x)
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
