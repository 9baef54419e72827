package email

import (
	"encoding/json"
	"fmt"
	"net/mail"
	"strings"
)

// Message is one email as a bot asks for it, addresses parsed.
type Message struct {
	From        *mail.Address
	To, Cc, Bcc []*mail.Address
	ReplyTo     []*mail.Address
	Subject     string
	Text, HTML  string
}

// Bounds of a message, so that a bot cannot make the gateway hold or send arbitrarily much.
const (
	maxRecipients = 50
	maxBodyBytes  = 1 << 20
)

// ParseMessage reads Medplum's email options (nodemailer's Mail.Options): each address field is a
// string ("a@x, B <b@y>"), an {name, address} object, or an array of either.
func ParseMessage(body []byte) (*Message, error) {
	var raw struct {
		From, To, Cc, Bcc, ReplyTo json.RawMessage
		Subject, Text, HTML        *string
		Attachments                json.RawMessage
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("the email is not a JSON object: %v", err)
	}
	m := &Message{}
	var err error
	fields := []struct {
		name string
		raw  json.RawMessage
		dst  *[]*mail.Address
	}{{"to", raw.To, &m.To}, {"cc", raw.Cc, &m.Cc}, {"bcc", raw.Bcc, &m.Bcc}, {"replyTo", raw.ReplyTo, &m.ReplyTo}}
	for _, f := range fields {
		if *f.dst, err = addresses(f.name, f.raw); err != nil {
			return nil, err
		}
	}
	from, err := addresses("from", raw.From)
	if err != nil {
		return nil, err
	}
	switch len(from) {
	case 0:
	case 1:
		m.From = from[0]
	default:
		return nil, fmt.Errorf("an email has one sender, not %d", len(from))
	}
	if len(m.To)+len(m.Cc)+len(m.Bcc) == 0 {
		return nil, fmt.Errorf("the email has no recipient (to, cc or bcc)")
	}
	if n := len(m.To) + len(m.Cc) + len(m.Bcc); n > maxRecipients {
		return nil, fmt.Errorf("the email has %d recipients, more than the limit of %d", n, maxRecipients)
	}
	for _, s := range []struct {
		p   *string
		dst *string
	}{{raw.Subject, &m.Subject}, {raw.Text, &m.Text}, {raw.HTML, &m.HTML}} {
		if s.p != nil {
			*s.dst = *s.p
		}
	}
	if strings.ContainsAny(m.Subject, "\r\n") {
		return nil, fmt.Errorf("the subject holds a line break")
	}
	if len(m.Subject)+len(m.Text)+len(m.HTML) > maxBodyBytes {
		return nil, fmt.Errorf("the email is larger than the limit of %d bytes", maxBodyBytes)
	}
	if len(raw.Attachments) > 0 && string(raw.Attachments) != "null" && string(raw.Attachments) != "[]" {
		return nil, fmt.Errorf("email attachments are not supported: link to a Binary instead")
	}
	return m, nil
}

func addresses(field string, raw json.RawMessage) ([]*mail.Address, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var items []json.RawMessage
	if raw[0] == '[' {
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, fmt.Errorf("%s: %v", field, err)
		}
	} else {
		items = []json.RawMessage{raw}
	}
	var out []*mail.Address
	for _, it := range items {
		var s string
		if err := json.Unmarshal(it, &s); err == nil {
			list, err := mail.ParseAddressList(s)
			if err != nil {
				return nil, fmt.Errorf("%s: %q is not an email address: %v", field, s, err)
			}
			out = append(out, list...)
			continue
		}
		var a struct{ Name, Address string }
		if err := json.Unmarshal(it, &a); err != nil || a.Address == "" {
			return nil, fmt.Errorf("%s: an address is a string or {name, address}", field)
		}
		addr, err := mail.ParseAddress(a.Address)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not an email address: %v", field, a.Address, err)
		}
		addr.Name = a.Name
		out = append(out, addr)
	}
	return out, nil
}
