//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package filedisk

import (
	"errors"
	"os"
)

// flock is not implemented here: without it two processes could write one
// directory at once, so Open refuses rather than risk it.
func flock(*os.File) (held bool, err error) {
	return false, errors.New("locking a data directory is implemented only on Linux, macOS and the BSDs")
}
