package store

import "errors"

// ErrConflict is returned when a write violates a uniqueness constraint, an
// If-Match version check fails, a delete is refused because other resources
// still depend on the target, or a transaction kept conflicting with
// concurrent writers. The wrapping error says which.
var ErrConflict = errors.New("conflict")

// ErrUnknownType is returned for a resource type the store does not keep.
var ErrUnknownType = errors.New("unknown resource type")

// ErrUnwritable means the storage cannot take writes right now: Badger's
// filesystem is (nearly) full or read-only (reads keep working), or the
// PostgreSQL server cannot be reached (package pgkv).
var ErrUnwritable = errors.New("storage cannot take writes")

// ValidationError reports an invalid resource field. Field is a JSON path
// such as "identityProvider.userInfoUrl" or "identifier[1].value".
type ValidationError struct {
	Field   string
	Message string
}

func (e *ValidationError) Error() string {
	return e.Field + ": " + e.Message
}

func invalid(field, message string) *ValidationError {
	return &ValidationError{Field: field, Message: message}
}

// ErrTxnTooBig is wrapped when one transaction would hold more than the
// storage accepts in one commit (Badger: 15% of its memtable, see
// badgerOptions). [Store.PutAll] returns it for a batch too large to write
// atomically; nothing of the batch is written.
var ErrTxnTooBig = errors.New("transaction too big")
