package lockapi

import (
	"testing"
	"time"
)

// The write timeout covers the longest wait: a waiting acquire's answer
// is written up to MaxWait + RequestTimeout after its body was read.
func TestWriteTimeoutCoversMaxWait(t *testing.T) {
	s := NewServer(nil, Config{MaxWait: time.Minute, RequestTimeout: 2 * time.Second, WriteTimeout: 5 * time.Second})
	if got, min := s.http.WriteTimeout, time.Minute+2*time.Second+s.cfg.ReadTimeout; got < min {
		t.Fatalf("write timeout %v, want at least %v", got, min)
	}
}
