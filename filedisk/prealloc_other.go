//go:build !linux

package filedisk

import "os"

// preallocate does nothing here: segments grow as they are written.
func preallocate(*os.File, int64, int64) error { return nil }
