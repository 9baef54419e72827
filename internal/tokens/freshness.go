package tokens

import (
	"context"
	"time"
)

// Keys made or retired elsewhere. Several replicas share one key store; a
// rotation on one must reach the others' keyrings. Two paths bring it:
//
//   - Options.KeysChanged, a counter the store moves when key records are
//     written (on PostgreSQL also by other replicas, through the change
//     feed): the keyring is reloaded on the first use after it moves.
//   - A token whose kid is not in the keyring reloads it before it is
//     refused (at most once per unknownKidReloadEvery), for a token signed
//     with a key so new that its change has not arrived yet.

// unknownKidReloadEvery rate-limits the reloads that unknown kids cause, so
// a stream of forged kids costs at most ten key-store reads a second.
const unknownKidReloadEvery = 100 * time.Millisecond

// keyReloadTimeout bounds a reload made on the way to issuing a token or
// serving the JWKS, which have no caller context.
const keyReloadTimeout = 5 * time.Second

// refreshKeys reloads the keyring if the key store reported a change since
// the last look. One caller reloads; the others go on with the current
// keyring. A failed reload keeps the current keys until the next change.
func (s *Service) refreshKeys(ctx context.Context) {
	if s.keysChanged == nil {
		return
	}
	seen := s.keysSeen.Load()
	n := s.keysChanged()
	if n == seen || !s.keysSeen.CompareAndSwap(seen, n) {
		return
	}
	_ = s.Reload(ctx)
}

// refreshKeysNow is refreshKeys for the paths without a caller context.
func (s *Service) refreshKeysNow() {
	if s.keysChanged == nil || s.keysChanged() == s.keysSeen.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), keyReloadTimeout)
	defer cancel()
	s.refreshKeys(ctx)
}

// reloadForUnknownKid reloads the keyring for a token whose kid it lacks,
// unless another such reload ran within unknownKidReloadEvery. It reports
// whether the keyring changed, that is whether verifying again may help.
func (s *Service) reloadForUnknownKid(ctx context.Context) bool {
	now := s.now().UnixNano()
	last := s.unknownKidReload.Load()
	if now-last < int64(unknownKidReloadEvery) || !s.unknownKidReload.CompareAndSwap(last, now) {
		return false
	}
	before := s.ring.Load()
	if err := s.Reload(ctx); err != nil {
		return false
	}
	return s.ring.Load() != before
}
