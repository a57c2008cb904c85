package nodesvc

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/fencesim/fencesim/filedisk"
)

// MaxTokenOffset bounds Config.TokenOffset: 2^40 tokens of room below
// 2^64, far more than a group's log grows (the reference's token is the
// granting log index plus the offset, and must not wrap).
const MaxTokenOffset = 1<<64 - 1<<40

// tokenOffsetKey records, on the node's disk, the token offset the
// group's log was started with: written once when the disk is brand-new,
// checked at every later start. The replica's own keys live under
// "raft/", so it never sees this one.
const tokenOffsetKey = "nodesvc/token-offset"

// ErrTokenOffset is what Open returns when Config.TokenOffset does not
// match the data directory's (or is out of range): tokens are log indexes
// plus the offset, so changing it on an existing log would issue tokens
// that break the fence. The command maps it to its configuration error.
var ErrTokenOffset = errors.New("token offset")

// checkTokenOffset makes sure the log in dir goes with offset: a
// brand-new (empty) disk records it; one that has a record must match it;
// one with data but no record (made before offsets existed) has offset 0.
// It opens the disk and closes it again before the node opens it.
func checkTokenOffset(dir string, opts filedisk.Options, offset uint64) error {
	if offset > MaxTokenOffset {
		return fmt.Errorf("%w %d is above %d (2^64 − 2^40): leave room for the group's tokens", ErrTokenOffset, offset, uint64(MaxTokenOffset))
	}
	d, err := filedisk.Open(dir, opts)
	if err != nil {
		return err
	}
	if b, ok := d.Read(tokenOffsetKey); ok {
		d.Close()
		have, perr := strconv.ParseUint(string(b), 10, 64)
		switch {
		case perr != nil:
			return fmt.Errorf("%s: the recorded token offset %q does not parse; restore the directory or start from a new one", dir, b)
		case have != offset:
			return fmt.Errorf("%w %d differs from %d, which %s was created with: an offset is set only for a brand-new data directory", ErrTokenOffset, offset, have, dir)
		}
		return nil
	}
	if len(d.Keys("")) > 0 {
		d.Close()
		if offset != 0 {
			return fmt.Errorf("%w %d: %s already holds a log started without an offset (0); an offset is set only for a brand-new data directory", ErrTokenOffset, offset, dir)
		}
		return nil
	}
	d.Write(tokenOffsetKey, []byte(strconv.FormatUint(offset, 10)))
	d.Sync()
	if err := d.Err(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}
