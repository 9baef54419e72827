package tokens

import (
	"bytes"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"math/big"
	"strings"
	"unsafe"
)

// ECDSA signatures are malleable: if (r, s) is a valid signature then so is
// (r, n − s), where n is the order of the curve. Without care every token
// has two spellings that both verify, and anything keyed by the token (the
// verified cache here; a deny list or replay cache anywhere) sees two
// different tokens. fhirgate closes this in three places:
//
//   - The signer produces only "low-S" signatures, s ≤ n/2 (issue
//     normalises the signature after jwx signs).
//   - Tokens signed that way say so in their protected header
//     (lowSHeader: true). The header is covered by the signature, so an
//     attacker who only re-spells a signature cannot add or remove the
//     marker, and a high-S signature on a marked token is refused. Tokens
//     issued before low-S signing carry no marker; they verify in either
//     spelling until they expire (at most MaxTokenLifetime), so an upgrade
//     signs nobody out. A marker in the token was chosen over recording in
//     the key ring since when each key signs low-S only: it needs no change
//     to stored keys, holds across replicas upgraded at different times and
//     across a restore of an older backup.
//   - Whatever is keyed by a token is keyed by its canonical (low-S)
//     spelling (canonicalKey), so both spellings of a pre-upgrade token are
//     one cache entry.

// lowSHeader is the protected-header parameter that marks a token whose
// signer produces only low-S signatures.
const lowSHeader = "low_s"

// sigEncoding decodes signatures strictly: a lenient decoder would map a
// spelling with stray trailing bits onto the canonical key of a cached
// token, letting it skip the strict check in verify.
var sigEncoding = base64.RawURLEncoding.Strict()

// sigSize is the size of an ES256 signature: r and s, 32 bytes each,
// big-endian (RFC 7518 §3.4).
const sigSize = 64

var (
	p256N = elliptic.P256().Params().N
	// p256HalfN is ⌊n/2⌋ as 32 big-endian bytes: s is low when s ≤ halfN.
	p256HalfN = func() (b [32]byte) {
		new(big.Int).Rsh(p256N, 1).FillBytes(b[:])
		return b
	}()
	p256NBytes = func() (b [32]byte) {
		p256N.FillBytes(b[:])
		return b
	}()
)

// highS reports whether s (32 big-endian bytes) is in (n/2, n): a valid
// scalar whose other spelling n − s is low. s ≥ n is not a valid signature
// scalar at all and is left to the verifier to refuse.
func highS(s []byte) bool {
	return bytes.Compare(s, p256HalfN[:]) > 0 && bytes.Compare(s, p256NBytes[:]) < 0
}

// flipS replaces s by n − s in place.
func flipS(s []byte) {
	v := new(big.Int).SetBytes(s)
	v.Sub(p256N, v).FillBytes(s)
}

// toLowS returns the compact token with its signature's s replaced by
// n − s when s is high; any other token is returned unchanged.
func toLowS(token string) string {
	dot := strings.LastIndexByte(token, '.')
	var sig [sigSize]byte
	if dot < 0 || base64.RawURLEncoding.EncodedLen(sigSize) != len(token)-dot-1 {
		return token
	}
	if _, err := sigEncoding.Decode(sig[:], []byte(token[dot+1:])); err != nil || !highS(sig[32:]) {
		return token
	}
	flipS(sig[32:])
	return token[:dot+1] + base64.RawURLEncoding.EncodeToString(sig[:])
}

// canonicalKey is what the verified cache keys a token by: the SHA-256 of
// its low-S spelling. Both spellings of a pre-upgrade token get the same
// key; high tells which spelling was presented, since a cached marked token
// must still be refused in its high-S spelling. The key is a hash, never
// the token: a dump of the cache yields nothing replayable.
func canonicalKey(token string) (key [32]byte, high bool) {
	dot := strings.LastIndexByte(token, '.')
	if dot >= 0 && len(token)-dot-1 == base64.RawURLEncoding.EncodedLen(sigSize) {
		var sig [sigSize]byte
		// The unsafe view avoids copying the token to decode it.
		enc := unsafe.Slice(unsafe.StringData(token[dot+1:]), len(token)-dot-1)
		if _, err := sigEncoding.Decode(sig[:], enc); err == nil && highS(sig[32:]) {
			return sha256.Sum256([]byte(toLowS(token))), true
		}
	}
	return sha256.Sum256(unsafe.Slice(unsafe.StringData(token), len(token))), false
}
