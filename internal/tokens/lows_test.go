package tokens

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"math/big"
	"strings"
	"testing"
	"time"
)

// sigS returns the s half of a token's signature.
func sigS(t *testing.T, tok string) []byte {
	t.Helper()
	sig, err := base64.RawURLEncoding.DecodeString(tok[strings.LastIndexByte(tok, '.')+1:])
	if err != nil || len(sig) != sigSize {
		t.Fatalf("signature of %d bytes, %v", len(sig), err)
	}
	return sig[32:]
}

// respell returns the token with its signature's s replaced by n − s: the
// other signature ECDSA accepts for the same header and payload.
func respell(t *testing.T, tok string) string {
	t.Helper()
	dot := strings.LastIndexByte(tok, '.')
	sig, err := base64.RawURLEncoding.DecodeString(tok[dot+1:])
	if err != nil || len(sig) != sigSize {
		t.Fatalf("signature of %d bytes, %v", len(sig), err)
	}
	s := new(big.Int).SetBytes(sig[32:])
	s.Sub(p256N, s).FillBytes(sig[32:])
	return tok[:dot+1] + b64(sig)
}

// preUpgradeToken signs an access token the way fhirgate did before it
// signed low-S: header {alg, kid, typ} with no low_s marker, and whatever s
// crypto/ecdsa produced. It returns both spellings, low-S first.
func preUpgradeToken(t *testing.T, priv *ecdsa.PrivateKey, kid string, claims map[string]any) (low, high string) {
	t.Helper()
	tok := signES256(t, priv, accessHeader(kid), claims)
	if highS(sigS(t, tok)) {
		return respell(t, tok), tok
	}
	return tok, respell(t, tok)
}

// TestIssuedSignaturesAreLowS: every token the service signs, of every
// kind, has s ≤ n/2 and says so in its header. crypto/ecdsa alone gives a
// high s about half the time, so 3 × 100 tokens all low is not luck.
func TestIssuedSignaturesAreLowS(t *testing.T) {
	e := newEnv(t, Options{})
	issue := map[string]func() (string, time.Time, error){
		"access": func() (string, time.Time, error) {
			return e.svc.IssueAccess(AccessClaims{Sub: "u", LoginID: "l"}, time.Hour)
		},
		"refresh": func() (string, time.Time, error) {
			return e.svc.IssueRefresh(RefreshClaims{LoginID: "l", RefreshSecret: "s"}, time.Hour)
		},
		"id": func() (string, time.Time, error) { return e.svc.IssueID(IDClaims{Sub: "u"}, time.Hour) },
	}
	for kind, fn := range issue {
		for i := range 100 {
			tok, _, err := fn()
			if err != nil {
				t.Fatal(err)
			}
			if highS(sigS(t, tok)) {
				t.Fatalf("%s token %d has a high-S signature", kind, i)
			}
			if decodePart(t, tok, 0)[lowSHeader] != true {
				t.Fatalf("%s token %d has no %s marker in its header", kind, i, lowSHeader)
			}
		}
	}
}

// TestHighSSpellingOfNewTokenIsRefused: the n − s spelling of a token
// issued low-S is refused with a signature error (invalid_token to the
// caller), for every kind, and also after the genuine spelling was cached.
func TestHighSSpellingOfNewTokenIsRefused(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := context.Background()
	access := e.access(t, time.Hour)
	refresh, _, err := e.svc.IssueRefresh(RefreshClaims{LoginID: "l", RefreshSecret: "s"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := e.svc.IssueID(IDClaims{Sub: "u"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	// Before the genuine token was seen: the full verification refuses.
	for _, tc := range []struct {
		tok  string
		kind Kind
	}{{access, KindAccess}, {refresh, KindRefresh}, {id, KindID}} {
		_, err := e.svc.Verify(ctx, respell(t, tc.tok), tc.kind)
		wantReason(t, err, ReasonSignature)
	}

	// After: the cache holds the token under its canonical key, and must
	// still refuse the other spelling.
	if _, err := e.svc.Verify(ctx, access, KindAccess); err != nil {
		t.Fatal(err)
	}
	checks := e.svc.sigChecks.Load()
	_, err = e.svc.Verify(ctx, respell(t, access), KindAccess)
	wantReason(t, err, ReasonSignature)
	if e.svc.sigChecks.Load() != checks {
		t.Fatal("the refusal should come from the cached entry, without a signature check")
	}
	if _, err := e.svc.Verify(ctx, access, KindAccess); err != nil {
		t.Fatalf("the genuine spelling after a refused re-spelling: %v", err)
	}

	// The marker is covered by the signature: a header without it, or with
	// it false, no longer matches the signature.
	parts := strings.Split(respell(t, access), ".")
	hdr := decodePart(t, access, 0)
	for _, v := range []any{nil, false} {
		if v == nil {
			delete(hdr, lowSHeader)
		} else {
			hdr[lowSHeader] = v
		}
		_, err := e.svc.Verify(ctx, b64JSON(t, hdr)+"."+parts[1]+"."+parts[2], KindAccess)
		wantReason(t, err, ReasonSignature)
	}
}

// TestPreUpgradeTokenVerifiesInBothSpellingsAsOneToken: a token issued
// before low-S signing (no marker) keeps verifying until it expires, in
// either spelling, and both spellings are one entry of the verified cache:
// the second costs no signature check.
func TestPreUpgradeTokenVerifiesInBothSpellingsAsOneToken(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := context.Background()
	low, high := preUpgradeToken(t, e.signer(t).Private, e.svc.SigningKeyID(), validClaims(e.clock.Now()))
	if low == high || highS(sigS(t, low)) || !highS(sigS(t, high)) {
		t.Fatal("test setup: want one low-S and one high-S spelling")
	}
	if k1, _ := canonicalKey(low); k1 != func() [32]byte { k, _ := canonicalKey(high); return k }() {
		t.Fatal("the two spellings have different cache keys")
	}
	if k, _ := canonicalKey(low); k != sha256.Sum256([]byte(low)) {
		t.Fatal("the canonical key of a low-S token is not the hash of the token")
	}

	for i, first := range []string{high, low} {
		e := newEnv(t, Options{Keys: e.store, Now: e.clock.Now})
		second := low
		if first == low {
			second = high
		}
		c1, err := e.svc.Verify(ctx, first, KindAccess)
		if err != nil {
			t.Fatalf("order %d: first spelling: %v", i, err)
		}
		checks := e.svc.sigChecks.Load()
		c2, err := e.svc.Verify(ctx, second, KindAccess)
		if err != nil {
			t.Fatalf("order %d: second spelling: %v", i, err)
		}
		if e.svc.sigChecks.Load() != checks {
			t.Fatalf("order %d: the second spelling was verified again instead of found in the cache", i)
		}
		if n := e.svc.cache.len(); n != 1 {
			t.Fatalf("order %d: %d cache entries for one token", i, n)
		}
		if c1.ID != c2.ID || c1.LoginID != c2.LoginID {
			t.Fatalf("order %d: claims differ between spellings", i)
		}
	}

	// Still only until it expires.
	e.clock.Advance(time.Hour)
	for _, tok := range []string{low, high} {
		_, err := e.svc.Verify(ctx, tok, KindAccess)
		wantReason(t, err, ReasonExpired)
	}
}

// TestRespelledSignatureWithStrayBitsIsRefused: canonicalising must not
// widen what is accepted. A high-S spelling whose last base64 character
// carries unused bits is not canonical base64url; mapped leniently onto the
// cached low-S token it would slip past verify's strict decoding.
func TestRespelledSignatureWithStrayBitsIsRefused(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := context.Background()
	low, high := preUpgradeToken(t, e.signer(t).Private, e.svc.SigningKeyID(), validClaims(e.clock.Now()))
	if _, err := e.svc.Verify(ctx, low, KindAccess); err != nil {
		t.Fatal(err)
	}
	// 64 bytes take 86 characters; the last one holds 2 data bits and 4
	// unused ones. Setting an unused bit keeps the decoded bytes.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, high[len(high)-1])
	stray := high[:len(high)-1] + string(alphabet[last|1])
	if stray == high {
		t.Fatal("test setup: the stray spelling equals the canonical one")
	}
	_, err := e.svc.Verify(ctx, stray, KindAccess)
	wantReason(t, err, ReasonMalformed)
}
