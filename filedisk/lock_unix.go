//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package filedisk

import (
	"errors"
	"os"
	"syscall"
)

// flock takes an exclusive lock on f without waiting. The kernel drops it
// when the file is closed or the process dies, so a crash never leaves a
// stale lock behind (as a pid file would).
func flock(f *os.File) (held bool, err error) {
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}
