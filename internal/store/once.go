package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// onceKey is where [Store.ClaimOnce] records a claimed value:
//
//	n/<namespace>/<value, escaped>   -> "" (expires with the claim)
func onceKey(namespace, value string) []byte {
	return appendEscaped(append(appendEscaped([]byte(oncePrefix), namespace), '/'), value)
}

const oncePrefix = "n/"

// ClaimOnce records that value has been used in namespace, for ttl (at
// least a second, the KV's granularity). A value already claimed and not
// yet expired fails with ErrConflict: it is how a replayed single-use value
// (a client assertion's jti) is refused. The claim is a key in the store,
// so every gateway sharing the store sees it, and it expires by itself; two
// concurrent claims of one value conflict in their transactions and only
// one succeeds.
func (s *Store) ClaimOnce(ctx context.Context, namespace, value string, ttl time.Duration) error {
	if namespace == "" || value == "" {
		return errors.New("claim: namespace and value are required")
	}
	ttl = max(ttl, time.Second)
	key := onceKey(namespace, value)
	err := s.kv.Update(ctx, func(tx Txn) error {
		_, err := tx.Get(key)
		switch {
		case err == nil:
			return fmt.Errorf("%w: %s value already used", ErrConflict, namespace)
		case !errors.Is(err, ErrNotFound):
			return err
		}
		return tx.Set(key, nil, ttl)
	})
	if err != nil {
		return fmt.Errorf("claiming a %s value: %w", namespace, err)
	}
	return nil
}
