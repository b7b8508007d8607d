package gateway

import (
	"net/http"
	"time"
)

// Timeouts of the gateway's HTTP server. A response may take as long as the longest
// function timeout (timeoutSeconds at most 300) plus a margin; a request must arrive
// well before that, and idle keep-alive connections are closed.
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = time.Minute
	WriteTimeout      = maxFunctionTimeout + 30*time.Second
	IdleTimeout       = 2 * time.Minute

	maxFunctionTimeout = 300 * time.Second
)

// NewServer is the HTTP server the gateway is served by, with its timeouts set.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
	}
}
