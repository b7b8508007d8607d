package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// isEventStream reports whether r is an EventSource asking for server-sent events.
func isEventStream(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// Stream sends server-sent events named event, each the HTML render returns, every
// interval until the client goes away: only when the HTML is not empty and differs
// from the last one sent (a comment line otherwise keeps the connection checked). A
// render error is sent as an event named "error" and the stream goes on; render
// returning errStop ends it.
func Stream(w http.ResponseWriter, r *http.Request, interval time.Duration, event string, render func(context.Context) (string, error)) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's write timeout
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var last string
	for {
		html, err := render(r.Context())
		name := event
		if err != nil {
			if err == errStop {
				return
			}
			name, html = "error", err.Error()
		}
		if html != "" && html != last {
			last = html
			if writeEvent(w, name, html) != nil || rc.Flush() != nil {
				return
			}
		} else if _, err := fmt.Fprint(w, ":\n\n"); err != nil || rc.Flush() != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
	}
}

// errStop, returned by a Stream's render, ends the stream.
var errStop = fmt.Errorf("stop the stream")

// writeEvent writes one event; every line of data gets its own "data:" field.
func writeEvent(w http.ResponseWriter, name, data string) error {
	var b strings.Builder
	b.WriteString("event: " + name + "\n")
	for _, line := range strings.Split(data, "\n") {
		b.WriteString("data: " + strings.TrimSuffix(line, "\r") + "\n")
	}
	b.WriteString("\n")
	_, err := fmt.Fprint(w, b.String())
	return err
}
