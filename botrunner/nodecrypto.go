package botrunner

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/subtle"
	"hash"

	"github.com/dop251/goja"
)

// require('crypto') and require('node:crypto'): createHash, createHmac, randomUUID, randomBytes,
// timingSafeEqual, getRandomValues, and webcrypto/subtle (the crypto global's), in Go.

func (x *execution) cryptoModule() *goja.Object {
	if x.lazy.nodeCrypto != nil {
		return x.lazy.nodeCrypto
	}
	rt := x.rt
	m := rt.NewObject()
	web := x.webCrypto()
	_ = m.Set("createHash", x.fn("createHash", func(c goja.FunctionCall) goja.Value {
		alg := c.Argument(0).String()
		newHash := nodeHash(alg)
		if newHash == nil {
			panic(unsupportedDigest(x))
		}
		return x.newHashObject(newHash(), "Hash")
	}))
	_ = m.Set("createHmac", x.fn("createHmac", func(c goja.FunctionCall) goja.Value {
		alg := c.Argument(0).String()
		newHash := nodeHash(alg)
		if newHash == nil {
			panic(unsupportedDigest(x))
		}
		key := c.Argument(1)
		var k []byte
		if goja.IsString(key) {
			k = []byte(key.String())
		} else if b, ok := x.bufferBytes(key); ok {
			k = append([]byte(nil), b...)
		} else {
			x.argTypeError("key", "of type string or an instance of ArrayBuffer, Buffer, TypedArray or DataView", key)
		}
		return x.newHashObject(hmac.New(newHash, k), "Hmac")
	}))
	_ = m.Set("randomUUID", web.Get("randomUUID"))
	_ = m.Set("getRandomValues", web.Get("getRandomValues"))
	_ = m.Set("webcrypto", web)
	_ = m.Set("subtle", web.Get("subtle"))
	_ = m.Set("randomBytes", x.fn("randomBytes", func(c goja.FunctionCall) goja.Value {
		n := c.Argument(0)
		if !goja.IsNumber(n) || n.ToFloat() < 0 || n.ToFloat() > maxBufferBytes || n.ToFloat() != float64(n.ToInteger()) {
			e := x.newError("RangeError", `The value of "size" is out of range. It must be >= 0 && <= 268435456. Received `+x.formatValue(n, false))
			_ = e.Set("code", "ERR_OUT_OF_RANGE")
			panic(e)
		}
		b := make([]byte, n.ToInteger())
		_, _ = rand.Read(b)
		buf := x.newBuffer(b)
		if cb, ok := goja.AssertFunction(c.Argument(1)); ok {
			// Node calls back asynchronously; a microtask keeps the order (after the caller).
			then := x.fn("randomBytes", func(goja.FunctionCall) goja.Value {
				if _, err := cb(goja.Undefined(), goja.Null(), buf); err != nil {
					panic(err)
				}
				return goja.Undefined()
			})
			x.eventLoop().queueMicrotask(goja.FunctionCall{Arguments: []goja.Value{then}})
			return goja.Undefined()
		}
		return buf
	}))
	_ = m.Set("timingSafeEqual", x.fn("timingSafeEqual", func(c goja.FunctionCall) goja.Value {
		a, b := x.bytesArg(c.Argument(0), "buf1"), x.bytesArg(c.Argument(1), "buf2")
		if len(a) != len(b) {
			e := x.newError("RangeError", "Input buffers must have the same byte length")
			_ = e.Set("code", "ERR_CRYPTO_TIMING_SAFE_EQUAL_LENGTH")
			panic(e)
		}
		return rt.ToValue(subtle.ConstantTimeCompare(a, b) == 1)
	}))
	x.lazy.nodeCrypto = m
	return m
}

// newHashObject is Node's Hash or Hmac: update(data[, inputEncoding]) returns it, digest([encoding])
// gives a string or a Buffer once, copy (Hash only) forks it.
func (x *execution) newHashObject(h hash.Hash, kind string) *goja.Object {
	rt := x.rt
	o := rt.NewObject()
	done := false
	finalized := func() {
		e := x.newError("Error", "Digest already called")
		_ = e.Set("code", "ERR_CRYPTO_HASH_FINALIZED")
		panic(e)
	}
	_ = o.Set("update", x.fn("update", func(c goja.FunctionCall) goja.Value {
		if done {
			finalized()
		}
		data := c.Argument(0)
		if goja.IsString(data) {
			h.Write(encodeString(data.String(), x.encodingArg(c.Argument(1))))
		} else {
			h.Write(x.bytesArg(data, "data"))
		}
		return o
	}))
	_ = o.Set("digest", x.fn("digest", func(c goja.FunctionCall) goja.Value {
		if done {
			finalized()
		}
		done = true
		sum := h.Sum(nil)
		if enc := c.Argument(0); !goja.IsUndefined(enc) && enc.String() != "buffer" {
			return rt.ToValue(decodeBytes(sum, x.encodingArg(enc)))
		}
		return x.newBuffer(sum)
	}))
	if kind == "Hash" {
		_ = o.Set("copy", x.fn("copy", func(goja.FunctionCall) goja.Value {
			if done {
				finalized()
			}
			c, ok := h.(hash.Cloner)
			if !ok {
				panic(x.newError("Error", "this hash cannot be copied"))
			}
			h2, err := c.Clone()
			if err != nil {
				panic(x.newError("Error", err.Error()))
			}
			return x.newHashObject(h2, kind)
		}))
	}
	return o
}

// unsupportedDigest is the error Node 22 (OpenSSL 3) throws for a hash it does not know.
func unsupportedDigest(x *execution) *goja.Object {
	e := x.newError("Error", "error:0308010C:digital envelope routines::unsupported")
	_ = e.Set("code", "ERR_OSSL_EVP_UNSUPPORTED")
	return e
}
