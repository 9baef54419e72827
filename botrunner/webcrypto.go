package botrunner

import (
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha3"
	"crypto/sha512"
	"hash"
	"strings"

	"github.com/dop251/goja"
	"github.com/google/uuid"
)

// The crypto global (Web Crypto's randomUUID, getRandomValues and subtle.digest), in Go.

// maxRandomValues is Web Crypto's quota for one getRandomValues call.
const maxRandomValues = 65536

// webDigests are the algorithms of crypto.subtle.digest.
var webDigests = map[string]func() hash.Hash{
	"SHA-1": sha1.New, "SHA-256": sha256.New, "SHA-384": sha512.New384, "SHA-512": sha512.New,
}

func (x *execution) webCrypto() *goja.Object {
	if x.lazy.webcrypto != nil {
		return x.lazy.webcrypto
	}
	rt := x.rt
	c := rt.NewObject()
	_ = c.Set("randomUUID", x.fn("randomUUID", func(goja.FunctionCall) goja.Value {
		return rt.ToValue(uuid.NewString())
	}))
	_ = c.Set("getRandomValues", x.fn("getRandomValues", x.getRandomValues))
	subtle := rt.NewObject()
	_ = subtle.Set("digest", x.fn("digest", func(call goja.FunctionCall) goja.Value {
		p, resolve, reject := rt.NewPromise()
		ex := rt.Try(func() {
			name := call.Argument(0)
			if o, ok := name.(*goja.Object); ok {
				name = o.Get("name")
			}
			alg := ""
			if name != nil && !goja.IsUndefined(name) {
				alg = strings.ToUpper(name.String())
			}
			newHash := webDigests[alg]
			if newHash == nil {
				e := x.newError("Error", "Unrecognized algorithm name")
				_ = e.Set("name", "NotSupportedError")
				panic(e)
			}
			data, ok := x.bufferBytes(call.Argument(1))
			if !ok {
				x.argTypeError("data", "an instance of ArrayBuffer, Buffer, TypedArray or DataView", call.Argument(1))
			}
			h := newHash()
			h.Write(data)
			_ = resolve(rt.NewArrayBuffer(h.Sum(nil)))
		})
		if ex != nil {
			_ = reject(ex.Value())
		}
		return rt.ToValue(p)
	}))
	_ = c.Set("subtle", subtle)
	x.lazy.webcrypto = c
	return c
}

// getRandomValues fills an integer typed array with random bytes and returns it.
func (x *execution) getRandomValues(c goja.FunctionCall) goja.Value {
	arg := c.Argument(0)
	integer := false
	if o, ok := arg.(*goja.Object); ok {
		switch o.Export().(type) { // what goja exports a typed array as
		case []int8, []uint8, []int16, []uint16, []int32, []uint32, []int64, []uint64:
			integer = true
		}
	}
	b, isView := x.bufferBytes(arg)
	if !integer || !isView {
		e := x.newError("TypeError", "The data argument must be an integer-type TypedArray")
		_ = e.Set("name", "TypeMismatchError")
		panic(e)
	}
	if len(b) > maxRandomValues {
		e := x.newError("Error", "The ArrayBufferView's byte length exceeds the number of bytes of entropy available via this API (65536)")
		_ = e.Set("name", "QuotaExceededError")
		panic(e)
	}
	_, _ = rand.Read(b)
	return arg
}

// nodeHashes are the algorithms of createHash and createHmac, by Node's names.
var nodeHashes = map[string]func() hash.Hash{
	"md5": md5.New, "sha1": sha1.New, "sha224": sha256.New224, "sha256": sha256.New,
	"sha384": sha512.New384, "sha512": sha512.New, "sha512-224": sha512.New512_224,
	"sha512-256": sha512.New512_256,
	"sha3-224":   func() hash.Hash { return sha3.New224() },
	"sha3-256":   func() hash.Hash { return sha3.New256() },
	"sha3-384":   func() hash.Hash { return sha3.New384() },
	"sha3-512":   func() hash.Hash { return sha3.New512() },
}

func nodeHash(name string) func() hash.Hash {
	n := strings.ToLower(name)
	n = strings.TrimPrefix(n, "rsa-")
	if f := nodeHashes[n]; f != nil {
		return f
	}
	// Node also knows "sha-256" and the like.
	return nodeHashes[strings.Replace(n, "sha-", "sha", 1)]
}
