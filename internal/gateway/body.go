package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/metalambda/metalambda/internal/httpapi"
)

type bodyKey struct{}

// bodyFirst reads the request body, within the gateway's BodyReadTimeout and its
// size limit (limitBody), before next takes a call slot: a client that trickles its
// body holds a connection, never a slot of the function it calls. readBody then
// answers from what was read.
func (g *Gateway) bodyFirst(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// The server's ReadTimeout still bounds the request; this bounds the body
		// more closely. A writer that has no deadline (a test recorder) reads without.
		if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(g.opts.BodyReadTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			httpapi.WriteError(w, httpapi.NewError(http.StatusInternalServerError, "internal", "set the body's read deadline: "+err.Error()))
			return
		}
		body, err := readBody(r)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), bodyKey{}, body)))
	}
}

// readBody is the request body: what bodyFirst read, or else read now, answering 413
// past the limit and 408 past the read deadline.
func readBody(r *http.Request) ([]byte, error) {
	if body, ok := r.Context().Value(bodyKey{}).([]byte); ok {
		return body, nil
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 && r.ContentLength < 1<<20 {
		buf.Grow(int(r.ContentLength) + 1) // +1: ReadFrom's last read finds EOF without growing
	}
	_, err := buf.ReadFrom(r.Body)
	var tooBig *http.MaxBytesError
	var netErr net.Error
	switch {
	case err == nil:
		return buf.Bytes(), nil
	case errors.As(err, &tooBig):
		return nil, httpapi.NewError(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the request body is over the limit of %d bytes", tooBig.Limit))
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout():
		return nil, httpapi.NewError(http.StatusRequestTimeout, "request_timeout", "the request body did not arrive in time")
	}
	return nil, httpapi.NewError(http.StatusBadRequest, "bad_request", "read the body: "+err.Error())
}
