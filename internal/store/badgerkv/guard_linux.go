package badgerkv

import (
	"os"
	"syscall"
	"unsafe"
)

// dirHandle keeps the store directory open so each write's check costs two
// syscalls on a descriptor (fstatfs and an ioctl), no path lookups.
type dirHandle struct{ f *os.File }

func openDir(dir string) (*dirHandle, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	return &dirHandle{f: f}, nil
}

func (d *dirHandle) close() error { return d.f.Close() }

// status returns the bytes available to unprivileged users on the
// directory's filesystem, and whether it cannot be written: mounted
// read-only, or the directory carries the immutable attribute (chattr +i,
// which stops root too).
func (d *dirHandle) status() (free uint64, readOnly bool, err error) {
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(int(d.f.Fd()), &st); err != nil {
		return 0, false, err
	}
	const stRdonly = 0x1 // ST_RDONLY
	return st.Bavail * uint64(st.Bsize), st.Flags&stRdonly != 0 || d.immutable(), nil
}

// immutable reads the directory's inode flags (FS_IOC_GETFLAGS).
// Filesystems without inode flags (tmpfs) answer an error: not immutable.
func (d *dirHandle) immutable() bool {
	const (
		fsIocGetflags = 0x80086601
		fsImmutableFl = 0x10
	)
	var flags int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, d.f.Fd(), fsIocGetflags, uintptr(unsafe.Pointer(&flags)))
	return errno == 0 && flags&fsImmutableFl != 0
}
