package store

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// jsonAppender is a record type with its own encoder, which prepare uses
// instead of encoding/json. Its output must be byte for byte what
// json.Marshal writes for the same value (TestAuditEventJSONMatchesMarshal,
// FuzzAuditEventJSON), so records read back the same whichever wrote them.
type jsonAppender interface {
	appendJSON(dst []byte) []byte
}

// encodeRecord is the stored JSON of r; an appender's is encoded in a
// pooled buffer (AppendPooled).
func encodeRecord(r storable) ([]byte, error) {
	if a, ok := r.(jsonAppender); ok {
		return AppendPooled(a.appendJSON), nil
	}
	return json.Marshal(r)
}

// appendJSON encodes the event as json.Marshal does. An AuditEvent is
// written with every bot run, and encoding/json's reflection over its nested
// structs was about a seventh of the process's CPU per stored event
// (BenchmarkAuditWrite's profile); this writes the same bytes with one
// allocation.
func (a *AuditEvent) appendJSON(b []byte) []byte {
	b = appendBaseJSON(b, a.Base())
	b = append(b, `,"type":`...)
	b = appendCodingJSON(b, &a.Type)
	b = append(b, `,"recorded":`...)
	b = appendJSONString(b, a.Recorded)
	if a.Period != nil {
		b = append(b, `,"period":{`...)
		n := len(b)
		b = appendOmitEmpty(b, `"start":`, a.Period.Start)
		b = appendOmitEmpty(b, `"end":`, a.Period.End)
		b = closeObject(b, n)
	}
	b = appendOmitEmpty(b, `,"outcome":`, a.Outcome)
	b = appendOmitEmpty(b, `,"outcomeDesc":`, a.OutcomeDesc)
	b = appendJSONArray(b, `,"agent":`, len(a.Agent), func(b []byte, i int) []byte {
		b = append(b, `{"who":`...)
		b = appendReferenceJSON(b, &a.Agent[i].Who)
		b = append(b, `,"requestor":`...)
		b = strconv.AppendBool(b, a.Agent[i].Requestor)
		return append(b, '}')
	})
	b = append(b, `,"source":{"observer":`...)
	b = appendReferenceJSON(b, &a.Source.Observer)
	b = append(b, '}')
	b = appendJSONArray(b, `,"entity":`, len(a.Entity), func(b []byte, i int) []byte {
		b = append(b, `{"what":`...)
		b = appendReferenceJSON(b, &a.Entity[i].What)
		return append(b, '}')
	})
	if len(a.Extension) > 0 {
		b = append(b, `,"extension":`...)
		b = appendExtensionsJSON(b, a.Extension)
	}
	return append(b, '}')
}

// appendBaseJSON opens the object and writes Base's fields.
func appendBaseJSON(b []byte, r *Base) []byte {
	b = append(b, `{"resourceType":`...)
	b = appendJSONString(b, r.ResourceType)
	b = appendOmitEmpty(b, `,"id":`, r.ID)
	b = append(b, `,"meta":{`...)
	n := len(b)
	m := &r.Meta
	b = appendOmitEmpty(b, `"versionId":`, m.VersionID)
	b = appendOmitEmpty(b, `"lastUpdated":`, m.LastUpdated)
	b = appendOmitEmpty(b, `"project":`, m.Project)
	b = appendJSONArray(b, `"profile":`, len(m.Profile), func(b []byte, i int) []byte {
		return appendJSONString(b, m.Profile[i])
	})
	b = appendJSONArray(b, `"security":`, len(m.Security), func(b []byte, i int) []byte {
		return appendCodingJSON(b, &m.Security[i])
	})
	b = appendJSONArray(b, `"tag":`, len(m.Tag), func(b []byte, i int) []byte {
		return appendCodingJSON(b, &m.Tag[i])
	})
	b = appendOmitEmpty(b, `"source":`, m.Source)
	return closeObject(b, n)
}

// appendJSONArray writes name and the n elements each writes, unless n
// is 0 (omitempty). Inside an object opened with closeObject (name without
// a leading comma) it ends with a comma, as appendOmitEmpty does.
func appendJSONArray(b []byte, name string, n int, each func(b []byte, i int) []byte) []byte {
	if n == 0 {
		return b
	}
	b = append(b, name...)
	b = append(b, '[')
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = each(b, i)
	}
	b = append(b, ']')
	if name[0] != ',' {
		b = append(b, ',')
	}
	return b
}

func appendCodingJSON(b []byte, c *Coding) []byte {
	b = append(b, '{')
	n := len(b)
	b = appendOmitEmpty(b, `"system":`, c.System)
	b = appendOmitEmpty(b, `"version":`, c.Version)
	b = appendOmitEmpty(b, `"code":`, c.Code)
	b = appendOmitEmpty(b, `"display":`, c.Display)
	if c.UserSelected != nil {
		b = append(b, `"userSelected":`...)
		b = strconv.AppendBool(b, *c.UserSelected)
		b = append(b, ',')
	}
	return closeObject(b, n)
}

func appendReferenceJSON(b []byte, r *Reference) []byte {
	b = append(b, `{"reference":`...)
	b = appendJSONString(b, r.Reference)
	b = appendOmitEmpty(b, `,"display":`, r.Display)
	return append(b, '}')
}

func appendExtensionsJSON(b []byte, xs []Extension) []byte {
	b = append(b, '[')
	for i := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		x := &xs[i]
		b = append(b, `{"url":`...)
		b = appendJSONString(b, x.URL)
		b = appendOmitEmpty(b, `,"valueId":`, x.ValueID)
		b = appendOmitEmpty(b, `,"valueCode":`, x.ValueCode)
		if x.ValueInteger != nil {
			b = append(b, `,"valueInteger":`...)
			b = strconv.AppendInt(b, *x.ValueInteger, 10)
		}
		if len(x.Extension) > 0 {
			b = append(b, `,"extension":`...)
			b = appendExtensionsJSON(b, x.Extension)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendOmitEmpty writes name and s unless s is empty (omitempty). Names
// written inside an object opened with closeObject end with a comma
// instead of starting with one.
func appendOmitEmpty(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	if name[0] == ',' {
		return appendJSONString(append(b, name...), s)
	}
	return append(appendJSONString(append(b, name...), s), ',')
}

// closeObject ends an object whose members since n each end with a comma.
func closeObject(b []byte, n int) []byte {
	if len(b) > n {
		b = b[:len(b)-1]
	}
	return append(b, '}')
}

// AppendJSONString appends s as a JSON string exactly as encoding/json
// writes it (appendJSONString), for other hand-written encoders of
// records that must match json.Marshal (kvqueue's job records).
func AppendJSONString(b []byte, s string) []byte { return appendJSONString(b, s) }

// appendJSONString writes s as a JSON string exactly as encoding/json does
// with its default HTML escaping: <, > and & as \u003c, \u003e and \u0026,
// invalid UTF-8 as \ufffd, and U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, `\b`...)
			case '\f':
				b = append(b, `\f`...)
			case '\n':
				b = append(b, `\n`...)
			case '\r':
				b = append(b, `\r`...)
			case '\t':
				b = append(b, `\t`...)
			default:
				b = append(b, `\u00`...)
				b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, `\u202`...)
			b = append(b, hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"
