package lockapi_test

import (
	"net"
	"time"
)

var dialer = net.Dialer{Timeout: 2 * time.Second}
