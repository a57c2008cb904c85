package lockapi

import (
	"errors"
	"strconv"
)

// Token is a fencing token: a uint64 that only grows per resource. It is
// encoded in JSON as a decimal string so that clients whose numbers are
// IEEE doubles (JavaScript) cannot lose precision above 2^53.
type Token uint64

// MarshalJSON encodes the token as a quoted decimal string.
func (t Token) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 22)
	b = append(b, '"')
	b = strconv.AppendUint(b, uint64(t), 10)
	return append(b, '"'), nil
}

// errTokenFormat is what a token that is not a quoted decimal uint64 gets.
var errTokenFormat = errors.New(`token must be a decimal string such as "42" (a uint64; JSON numbers are refused because JavaScript rounds them above 2^53)`)

// UnmarshalJSON accepts only a quoted decimal uint64: no sign, no
// exponent, no leading '+', and not a JSON number.
func (t *Token) UnmarshalJSON(b []byte) error {
	if len(b) < 3 || b[0] != '"' || b[len(b)-1] != '"' {
		return errTokenFormat
	}
	s := b[1 : len(b)-1]
	for _, c := range s {
		if c < '0' || c > '9' {
			return errTokenFormat
		}
	}
	v, err := strconv.ParseUint(string(s), 10, 64)
	if err != nil {
		return errTokenFormat
	}
	*t = Token(v)
	return nil
}

// String returns the decimal form.
func (t Token) String() string { return strconv.FormatUint(uint64(t), 10) }
