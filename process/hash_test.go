package process

import (
	"hash/fnv"
	"testing"
)

// TestHashStringIsFNV1a: HashString must stay 64-bit FNV-1a, since every
// message fingerprint, and so every recorded trace hash, folds it in.
func TestHashStringIsFNV1a(t *testing.T) {
	for _, s := range []string{"", "a", "foobar", "lock", "\x00\xff", "a much longer resource name/with/slashes"} {
		h := fnv.New64a()
		h.Write([]byte(s))
		if got, want := HashString(s), h.Sum64(); got != want {
			t.Errorf("HashString(%q) = %#x, want %#x", s, got, want)
		}
	}
}

// TestMixIsStable pins Mix's values (those of sim.Mix before it moved
// here): changing them changes every trace hash, which replay files and
// golden hashes record.
func TestMixIsStable(t *testing.T) {
	for _, tt := range []struct{ h, w, want uint64 }{
		{0, 0, 0},
		{0, 1, 0x9e3779bd8ef1b1de},
		{0x1234, 0xabcd, 0xfaec726e747e4e20},
	} {
		if got := Mix(tt.h, tt.w); got != tt.want {
			t.Errorf("Mix(%#x, %#x) = %#x, want %#x", tt.h, tt.w, got, tt.want)
		}
	}
}
