package botrunner

import (
	"encoding/base64"
	"strings"

	"github.com/dop251/goja"
)

// atob and btoa as the HTML standard (and Node) define them: binary strings, one character per
// byte; a character above U+00FF, or input that is not base64, throws InvalidCharacterError.

func (x *execution) newBtoa() goja.Value {
	return x.fn("btoa", func(c goja.FunctionCall) goja.Value {
		if len(c.Arguments) == 0 {
			x.argTypeError("data", "specified", goja.Undefined())
		}
		units := []rune(c.Argument(0).String())
		b := make([]byte, len(units))
		for i, r := range units {
			if r > 0xFF {
				panic(x.domException("InvalidCharacterError", "Invalid character"))
			}
			b[i] = byte(r)
		}
		return x.rt.ToValue(base64.StdEncoding.EncodeToString(b))
	})
}

func (x *execution) newAtob() goja.Value {
	return x.fn("atob", func(c goja.FunctionCall) goja.Value {
		if len(c.Arguments) == 0 {
			x.argTypeError("data", "specified", goja.Undefined())
		}
		s := strings.Map(func(r rune) rune {
			switch r {
			case ' ', '\t', '\n', '\f', '\r':
				return -1
			}
			return r
		}, c.Argument(0).String())
		if len(s)%4 == 0 {
			s = strings.TrimSuffix(s, "=")
			s = strings.TrimSuffix(s, "=")
		}
		b, err := base64.RawStdEncoding.DecodeString(s)
		if err != nil || len(s)%4 == 1 {
			panic(x.domException("InvalidCharacterError", "The string to be decoded is not correctly encoded."))
		}
		return x.rt.ToValue(decodeBytes(b, "latin1"))
	})
}

// domException is an Error named as a DOMException of the standards (there is no DOMException
// class in the sandbox), with its legacy code.
func (x *execution) domException(name, message string) *goja.Object {
	e := x.newError("Error", message)
	_ = e.Set("name", name)
	if name == "InvalidCharacterError" {
		_ = e.Set("code", 5)
	}
	return e
}
