package botrunner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/hl7"
)

// Media types of $execute request and response bodies (Medplum's ContentType names).
const (
	MediaText = "text/plain"
	MediaJSON = "application/json"
	MediaFHIR = "application/fhir+json"
	MediaForm = "application/x-www-form-urlencoded"
	MediaHL7  = "x-application/hl7-v2+er7"
)

// supportedMediaTypes is named in every 415 answer.
const supportedMediaTypes = MediaText + ", " + MediaJSON + ", " + MediaFHIR + ", " + MediaForm + ", " + MediaHL7

// MaxJSONDepth is the deepest nesting of objects and arrays a JSON body may have. Deeper input is
// rejected before it reaches the JavaScript engine, whose JSON.parse recurses on the Go stack.
const MaxJSONDepth = 128

// InputKind says which field of Input holds event.input.
type InputKind int

// Input kinds, one per supported request media type.
const (
	InputJSON InputKind = iota // application/json, and an empty body without Content-Type: Input.JSON
	InputFHIR                  // application/fhir+json: Input.JSON, with Input.ResourceType
	InputText                  // text/plain: Input.Text
	InputForm                  // application/x-www-form-urlencoded: Input.Form
	InputHL7                   // x-application/hl7-v2+er7: Input.HL7
)

// Input is a $execute request body: what the bot receives as event.input. Build it with
// ParseInput, or with PrepareInput to have the executor parse it once the run holds a slot; the
// runner trusts parsed JSON to be valid and HL7 to be non-nil.
type Input struct {
	Kind InputKind

	// JSON is a validated JSON object or array (InputJSON, InputFHIR). The runtime turns it
	// into JavaScript values with JSON.parse, so bots get ordinary objects.
	JSON []byte

	// ResourceType is the resource's type (InputFHIR).
	ResourceType string

	// Text is the body (InputText).
	Text string

	// Form holds one value per field (InputForm).
	Form map[string]string

	// HL7 is the parsed message (InputHL7); the bot sees it as Medplum's Hl7Message.
	HL7 *hl7.Message

	// deferred says the body is not parsed yet: PrepareInput checked only the media type, and
	// the executor parses body (ParseInput's rules) once the run holds a slot.
	deferred bool
	body     []byte
}

// parseDeferred parses a body PrepareInput left unparsed, in place. The error is an
// *InputError.
func (in *Input) parseDeferred() error {
	if !in.deferred {
		return nil
	}
	parsed, err := parseBody(in.Kind, in.body)
	if err != nil {
		return err
	}
	*in = parsed
	return nil
}

// InputError is a request body the runner refuses: a fhir.Error whose Status is 400 (malformed
// body) or 415 (unsupported media type or charset); Message says what is wrong without quoting the
// body, and Expression optionally names the offending element (for
// OperationOutcome.issue.expression).
type InputError = fhir.Error

func badInput(format string, args ...any) *InputError {
	return &InputError{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...)}
}

func unsupportedInput(format string, args ...any) *InputError {
	return &InputError{Status: http.StatusUnsupportedMediaType, Message: fmt.Sprintf(format, args...)}
}

// ParseInput turns a $execute request body into event.input according to its Content-Type:
//
//	text/plain                          string
//	application/json                    JSON object or array (a scalar → 400); empty body → {}
//	application/x-www-form-urlencoded   field → value; a repeated field or a bad escape → 400
//	application/fhir+json               object whose resourceType is an R4 resource type, else 400
//	x-application/hl7-v2+er7            HL7 v2 message; CR, LF or CRLF, BOM and MLLP framing
//	                                    tolerated; not starting with MSH → 400
//	(no Content-Type, empty body)       {}
//	anything else                       415 naming the supported types
//
// Media type parameters are accepted; a charset other than utf-8 or us-ascii is a 415, and a
// body that is not valid UTF-8 is a 400. JSON nested deeper than MaxJSONDepth is a 400. A leading
// UTF-8 byte order mark is skipped in JSON bodies.
//
// Differences from Medplum, which turns every empty body into {}: an empty text/plain body is
// "", an empty form is {}, and an empty FHIR or HL7 body is a 400 (neither is a resource or a
// message).
//
// Size limits are the caller's: read at most the configured maximum plus one byte and answer 413
// when it is exceeded. For a GET $execute, Medplum's input is the query: pass the raw query with
// MediaForm. body becomes the input's: it must not change afterwards.
func ParseInput(contentType string, body []byte) (Input, error) {
	in, err := PrepareInput(contentType, body)
	if err != nil {
		return Input{}, err
	}
	if err := in.parseDeferred(); err != nil {
		return Input{}, err
	}
	return in, nil
}

// PrepareInput does the part of ParseInput that does not depend on the body's size — the
// media type and charset checks, with their 415s — and returns an Input that holds body
// unparsed. Runner and Pool parse it (the rest of ParseInput's rules, whose 400s Run returns
// as an *InputError) only once the run holds a slot, and a Pool in the worker process: so the
// gateway builds nothing proportional to a body before the request holds its share, and
// nothing at all under process isolation. body becomes the input's: it must not change
// afterwards (an HL7 message refers to it in place).
func PrepareInput(contentType string, body []byte) (Input, error) {
	if strings.TrimSpace(contentType) == "" {
		if len(body) == 0 {
			return Input{Kind: InputJSON, JSON: emptyObject}, nil
		}
		return Input{}, unsupportedInput("a request body needs a Content-Type; supported types: %s", supportedMediaTypes)
	}
	media, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return Input{}, badInput("malformed Content-Type header: %v", err)
	}
	kind, ok := inputKinds[media]
	if !ok {
		return Input{}, unsupportedInput("unsupported Content-Type '%s'; supported types: %s", media, supportedMediaTypes)
	}
	if cs, ok := params["charset"]; ok && !isUTF8Charset(cs) {
		return Input{}, unsupportedInput("unsupported charset '%s': send UTF-8", cs)
	}
	return Input{Kind: kind, deferred: true, body: body}, nil
}

// parseBody parses a body whose media type PrepareInput accepted as kind.
func parseBody(kind InputKind, body []byte) (Input, error) {
	if !utf8.Valid(body) {
		return Input{}, badInput("request body is not valid UTF-8")
	}
	switch kind {
	case InputText:
		return Input{Kind: InputText, Text: string(body)}, nil
	case InputForm:
		return parseForm(body)
	case InputHL7:
		// The message refers to its text instead of copying it, and the body is the caller's
		// to give away (PrepareInput: it must not change): reading it in place saves a copy, a
		// quarter of what parsing a message of tiny segments costs.
		msg, err := hl7.Parse(unsafe.String(unsafe.SliceData(body), len(body)))
		if err != nil {
			return Input{}, badInput("invalid HL7 v2 message: %v", err)
		}
		return Input{Kind: InputHL7, HL7: msg}, nil
	case InputFHIR:
		return parseFHIR(body)
	default:
		return parseJSON(body)
	}
}

var inputKinds = map[string]InputKind{
	MediaText: InputText,
	MediaJSON: InputJSON,
	MediaFHIR: InputFHIR,
	MediaForm: InputForm,
	MediaHL7:  InputHL7,
}

var emptyObject = []byte("{}")

func isUTF8Charset(cs string) bool {
	switch strings.ToLower(cs) {
	case "utf-8", "utf8", "us-ascii":
		return true
	}
	return false
}

func parseJSON(body []byte) (Input, error) {
	body = bytes.TrimPrefix(body, utf8BOM)
	if len(bytes.TrimSpace(body)) == 0 {
		return Input{Kind: InputJSON, JSON: emptyObject}, nil
	}
	info, err := scanJSON(body)
	if err != nil {
		return Input{}, err
	}
	if info.top != '{' && info.top != '[' {
		return Input{}, badInput("a JSON body must be an object or an array, not a bare %s", jsonKindName(info.top))
	}
	return Input{Kind: InputJSON, JSON: body}, nil
}

func parseFHIR(body []byte) (Input, error) {
	body = bytes.TrimPrefix(body, utf8BOM)
	if len(bytes.TrimSpace(body)) == 0 {
		return Input{}, &InputError{Status: http.StatusBadRequest, Message: "empty body: a FHIR resource is required", Expression: "resourceType"}
	}
	info, err := scanJSON(body)
	if err != nil {
		return Input{}, err
	}
	if info.top != '{' {
		return Input{}, badInput("a FHIR resource must be a JSON object, not a %s", jsonKindName(info.top))
	}
	switch {
	case !info.hasResourceType:
		return Input{}, &InputError{Status: http.StatusBadRequest, Message: "missing resourceType", Expression: "resourceType"}
	case !info.resourceTypeIsString:
		return Input{}, &InputError{Status: http.StatusBadRequest, Message: "resourceType must be a string", Expression: "resourceType"}
	case !fhir.IsResourceType(info.resourceType) && !fhir.IsMedplumResourceType(info.resourceType):
		return Input{}, &InputError{Status: http.StatusBadRequest,
			Message: fmt.Sprintf("unknown resourceType '%s'", truncate(info.resourceType, 64)), Expression: "resourceType"}
	}
	return Input{Kind: InputFHIR, JSON: body, ResourceType: info.resourceType}, nil
}

func jsonKindName(top byte) string {
	switch top {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

func parseForm(body []byte) (Input, error) {
	values, err := url.ParseQuery(string(body))
	if err != nil {
		var esc url.EscapeError
		if errors.As(err, &esc) {
			return Input{}, badInput("invalid form body: bad percent-escape %s", truncate(string(esc), 16))
		}
		return Input{}, badInput("invalid form body: %v", err)
	}
	form := make(map[string]string, len(values))
	var repeated []string
	for k, v := range values {
		if len(v) > 1 {
			repeated = append(repeated, k)
			continue
		}
		if !utf8.ValidString(k) || !utf8.ValidString(v[0]) {
			return Input{}, badInput("invalid form body: a percent-escape does not decode to UTF-8")
		}
		form[k] = v[0]
	}
	if len(repeated) > 0 {
		sort.Strings(repeated)
		return Input{}, &InputError{Status: http.StatusBadRequest,
			Message:    fmt.Sprintf("form field '%s' is repeated; each field may appear once", truncate(repeated[0], 64)),
			Expression: repeated[0]}
	}
	return Input{Kind: InputForm, Form: form}, nil
}

var utf8BOM = []byte("\xef\xbb\xbf")

// truncate shortens s to at most n bytes on a rune boundary, for quoting input in messages.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// jsonInfo is what scanJSON learns about a valid JSON document.
type jsonInfo struct {
	top                  byte // first byte of the top-level value
	hasResourceType      bool
	resourceTypeIsString bool
	resourceType         string // the last top-level "resourceType", as JSON.parse would keep it
}

// scanJSON validates body, measures its nesting depth and finds the top-level "resourceType"
// member. Errors are 400s that name the line, column and byte offset.
func scanJSON(body []byte) (jsonInfo, error) {
	if info, ok := quickScanJSON(body); ok {
		return info, nil
	}
	return scanJSONStd(body)
}

// scanJSONStd is scanJSON with encoding/json's validator and, in one extra pass, the depth and
// the resourceType: the reference quickScanJSON is tested against, and what explains a body
// quickScanJSON refuses.
func scanJSONStd(body []byte) (jsonInfo, error) {
	if !json.Valid(body) {
		var raw json.RawMessage
		err := json.Unmarshal(body, &raw) // only scans: reports where the syntax breaks
		var se *json.SyntaxError
		if errors.As(err, &se) {
			// Offset counts the bytes read, the offending one included, except at the end of input.
			at := int(se.Offset)
			if at > 0 && at <= len(body) && !strings.Contains(se.Error(), "end of JSON input") {
				at--
			}
			line, col := lineColumn(body, at)
			return jsonInfo{}, badInput("invalid JSON at line %d, column %d (byte offset %d): %s", line, col, at, se.Error())
		}
		return jsonInfo{}, badInput("invalid JSON: %v", err)
	}
	var info jsonInfo
	depth := 0
	expectKey := false // at depth 1 of a top-level object, the next string is a member name
	var key []byte     // the member name whose value comes next, at depth 1
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch c {
		case ' ', '\t', '\r', '\n', ':':
			continue
		}
		if info.top == 0 {
			info.top = c
		}
		switch c {
		case '{', '[':
			if depth == 1 && key != nil {
				info.noteMember(key, nil)
				key = nil
			}
			depth++
			if depth > MaxJSONDepth {
				return jsonInfo{}, badInput("JSON is nested deeper than %d levels", MaxJSONDepth)
			}
			expectKey = depth == 1 && c == '{'
		case '}', ']':
			depth--
		case ',':
			expectKey = depth == 1 && info.top == '{'
		case '"':
			end := stringEnd(body, i)
			if depth == 1 && info.top == '{' {
				if expectKey {
					key, expectKey = body[i:end], false
				} else if key != nil {
					info.noteMember(key, body[i:end])
					key = nil
				}
			}
			i = end - 1
		default: // number or literal
			if depth == 1 && key != nil {
				info.noteMember(key, nil)
				key = nil
			}
		}
	}
	return info, nil
}

// noteMember records a top-level member; value is the quoted string, or nil for any other value.
func (info *jsonInfo) noteMember(quotedKey, value []byte) {
	if unquote(quotedKey) != "resourceType" {
		return
	}
	info.hasResourceType = true
	info.resourceTypeIsString = value != nil
	info.resourceType = ""
	if value != nil {
		info.resourceType = unquote(value)
	}
}

// stringEnd returns the index just past the JSON string that starts at body[start] == '"'.
func stringEnd(body []byte, start int) int {
	for i := start + 1; i < len(body); i++ {
		switch body[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(body)
}

// unquote decodes a valid JSON string literal.
func unquote(quoted []byte) string {
	if bytes.IndexByte(quoted, '\\') < 0 {
		return string(quoted[1 : len(quoted)-1])
	}
	var s string
	_ = json.Unmarshal(quoted, &s) // already validated
	return s
}

// lineColumn converts a 0-based byte offset into a 1-based line and column.
func lineColumn(body []byte, offset int) (line, col int) {
	offset = min(max(offset, 0), len(body))
	before := body[:offset]
	line = 1 + bytes.Count(before, []byte{'\n'})
	col = offset - bytes.LastIndexByte(before, '\n')
	return line, col
}
