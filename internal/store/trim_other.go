//go:build !linux

package store

import "errors"

// canPageOut tells OpenBadger whether to start the trimming loop: handing
// mapped pages back is implemented for Linux only.
const canPageOut = false

func pageOutStoreFiles(string) (int, error) {
	return 0, errors.New("paging out store files is implemented for Linux only")
}
