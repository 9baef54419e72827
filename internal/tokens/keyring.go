package tokens

import (
	"bytes"
	"cmp"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

// ringKey is the verifying half of a stored key.
type ringKey struct {
	id      string
	pub     *ecdsa.PublicKey
	active  bool
	created time.Time
	retired time.Time
	jwk     []byte // public JWK JSON for the JWKS
}

// verifiesAt reports whether tokens signed with the key are still accepted.
// It is evaluated per verification, not only at rotation, because a retired
// key's grace period ends with the passage of time alone.
func (k *ringKey) verifiesAt(now time.Time, maxLife time.Duration) bool {
	return k.active || (!k.retired.IsZero() && now.Before(k.retired.Add(maxLife)))
}

// keyring is an immutable snapshot of the keys; a rotation builds a new one.
type keyring struct {
	signer Key
	keys   map[string]*ringKey
	order  []*ringKey // JWKS order: signer first, then newest first
}

// buildKeyring validates keys and keeps those that still verify at now.
func buildKeyring(keys []Key, now time.Time, maxLife time.Duration) (*keyring, error) {
	r := &keyring{keys: make(map[string]*ringKey, len(keys))}
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if k.ID == "" {
			return nil, errors.New("stored key without id")
		}
		if seen[k.ID] {
			return nil, fmt.Errorf("key %q stored twice", k.ID)
		}
		seen[k.ID] = true
		if err := checkCurve(k.Private); err != nil {
			return nil, fmt.Errorf("key %q: %w", k.ID, err)
		}
		rk := &ringKey{id: k.ID, pub: &k.Private.PublicKey, active: k.Active, created: k.Created, retired: k.Retired}
		if !rk.verifiesAt(now, maxLife) {
			continue
		}
		if k.Active && (r.signer.Private == nil || newer(k, r.signer)) {
			r.signer = k
		}
		pub, err := publicJWK(k)
		if err != nil {
			return nil, err
		}
		rk.jwk = pub
		r.keys[k.ID] = rk
		r.order = append(r.order, rk)
	}
	if r.signer.Private == nil {
		return nil, errors.New("no active signing key")
	}
	slices.SortFunc(r.order, func(a, b *ringKey) int {
		switch {
		case a.id == r.signer.ID:
			return -1
		case b.id == r.signer.ID:
			return 1
		}
		if c := b.created.Compare(a.created); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	return r, nil
}

// newer orders active keys: the most recently created one signs, so that
// after a rotation that could not retire the old key (a failed Save) the
// new key still wins on every replica.
func newer(a, b Key) bool {
	if c := a.Created.Compare(b.Created); c != 0 {
		return c > 0
	}
	return a.ID > b.ID
}

func publicJWK(k Key) ([]byte, error) {
	jk, err := jwk.Import(&k.Private.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("key %q: building JWK: %w", k.ID, err)
	}
	for name, v := range map[string]any{
		jwk.KeyIDKey:     k.ID,
		jwk.AlgorithmKey: jwa.ES256(),
		jwk.KeyUsageKey:  jwk.ForSignature,
	} {
		if err := jk.Set(name, v); err != nil {
			return nil, fmt.Errorf("key %q: building JWK: %w", k.ID, err)
		}
	}
	b, err := json.Marshal(jk)
	if err != nil {
		return nil, fmt.Errorf("key %q: building JWK: %w", k.ID, err)
	}
	return b, nil
}

// dropsSome reports whether a key verifying in old is gone from r, which
// means tokens in the verified cache may no longer be acceptable.
func (r *keyring) dropsSome(old *keyring) bool {
	if old == nil {
		return false
	}
	for id := range old.keys {
		if _, ok := r.keys[id]; !ok {
			return true
		}
	}
	return false
}

// jwksDoc is the serialised JWKS for one keyring, valid until the next
// retired key's grace period ends.
type jwksDoc struct {
	ring  *keyring
	body  []byte
	until time.Time
}

func buildJWKS(r *keyring, now time.Time, maxLife time.Duration) *jwksDoc {
	doc := &jwksDoc{ring: r, until: now.Add(maxLife)}
	var b bytes.Buffer
	b.WriteString(`{"keys":[`)
	n := 0
	for _, k := range r.order {
		if !k.verifiesAt(now, maxLife) {
			continue
		}
		if !k.active {
			if end := k.retired.Add(maxLife); end.Before(doc.until) {
				doc.until = end
			}
		}
		if n > 0 {
			b.WriteByte(',')
		}
		b.Write(k.jwk)
		n++
	}
	b.WriteString(`]}`)
	doc.body = b.Bytes()
	return doc
}
