//go:build linux

package filedisk

import (
	"errors"
	"os"
	"syscall"
)

// preallocate gives f blocks for the size bytes from off, reading as
// zeros, and makes the file at least off+size long (fallocate(2), mode
// 0). Writes into blocks the file already has, within its size, make an
// fsync flush the data alone: appending to a file makes every fsync
// also journal the file's new size and blocks, which on ext4 here costs
// half as much again (140 µs an fsync against 90–95 µs). etcd's WAL
// preallocates its segments for the same reason. A file system that
// cannot preallocate is no error: the segment then grows as it is written.
func preallocate(f *os.File, off, size int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = syscall.Fallocate(int(fd), 0, off, size)
			if !errors.Is(ferr, syscall.EINTR) {
				return
			}
		}
	}); err != nil {
		return err
	}
	if errors.Is(ferr, syscall.EOPNOTSUPP) || errors.Is(ferr, syscall.ENOSYS) {
		return nil
	}
	return ferr
}
