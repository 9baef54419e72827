//go:build !linux

package badgerkv

import "math"

// dirHandle is not implemented off Linux: free space is reported as
// unlimited, and the write probe alone guards the directory.
type dirHandle struct{}

func openDir(string) (*dirHandle, error) { return &dirHandle{}, nil }

func (*dirHandle) close() error { return nil }

func (*dirHandle) status() (free uint64, readOnly bool, err error) {
	return math.MaxUint64, false, nil
}
