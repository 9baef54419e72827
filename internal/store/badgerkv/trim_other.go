//go:build !linux

package badgerkv

import "errors"

// canPageOut tells Open whether to start the trimming loop: handing
// mapped pages back is implemented for Linux only.
const canPageOut = false

type trimmer struct{}

func newTrimmer(string) *trimmer { return &trimmer{} }

func (*trimmer) pass() (int, error) {
	return 0, errors.New("handing back mapped store pages is implemented for Linux only")
}
