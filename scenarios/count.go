package scenarios

import (
	"fmt"
	"strings"
)

// Count renders n with its noun in the right number: "1 client",
// "2 clients", "1 store apply", "3 store applies".
func Count(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	if k := len(noun); k >= 2 && noun[k-1] == 'y' && !strings.ContainsRune("aeiou", rune(noun[k-2])) {
		return fmt.Sprintf("%d %sies", n, noun[:k-1])
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
