package live

import "errors"

// linkSet holds a run's proxies, one per directed link. TODO(livecore): the proxies.
type linkSet struct{}

func (l *linkSet) add(from, to, addr string) (string, error) {
	return "", errors.New("live: TODO proxies")
}
