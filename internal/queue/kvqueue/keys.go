package kvqueue

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Key layout, beside the store's own (internal/store/keys.go) under a
// prefix it does not use:
//
//	w/j/<id>                -> the job's record (JSON)
//	w/t/<run at>/<id>       -> a copy of the record while the job waits
//	                           ("" when written by an earlier version);
//	                           <run at> is Unix nanoseconds, 20 digits, so
//	                           keys sort by time
//	w/r/<id>                -> "" while a worker runs it (what a start rescues)
//	w/u/<kind>/<unique key> -> id of the job holding the key
//
// A kind has no '/', so a unique key (any string) ends its key
// unambiguously.
const (
	prefixJob     = "w/j/"
	prefixWaiting = "w/t/"
	prefixRunning = "w/r/"
	prefixUnique  = "w/u/"
)

func jobKey(id string) []byte     { return []byte(prefixJob + id) }
func runningKey(id string) []byte { return []byte(prefixRunning + id) }

func uniqueKey(kind, key string) []byte { return []byte(prefixUnique + kind + "/" + key) }

func waitingKey(at time.Time, id string) []byte {
	return fmt.Appendf(nil, "%s%020d/%s", prefixWaiting, max(at.UnixNano(), 0), id)
}

// parseWaiting splits a waiting key into its time and job id.
func parseWaiting(key []byte) (time.Time, string, bool) {
	rest := strings.TrimPrefix(string(key), prefixWaiting)
	ts, id, ok := strings.Cut(rest, "/")
	if !ok {
		return time.Time{}, "", false
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return time.Time{}, "", false
	}
	return time.Unix(0, n), id, true
}
