package kubeclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/client-go/rest"
)

func TestServerFlowControl(t *testing.T) {
	for _, tt := range []struct {
		name   string
		header string
		want   bool
	}{
		{"API Priority and Fairness", "0f6a1a3e-2b0e-4d57-9c1e-000000000000", true},
		{"no flow control", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/livez/ping" {
					http.NotFound(w, r)
					return
				}
				if tt.header != "" {
					w.Header().Set(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID, tt.header)
				}
			}))
			defer srv.Close()
			got, err := ServerFlowControl(context.Background(), &rest.Config{Host: srv.URL})
			if err != nil || got != tt.want {
				t.Errorf("ServerFlowControl = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestServerFlowControlUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	if _, err := ServerFlowControl(context.Background(), &rest.Config{Host: srv.URL}); err == nil {
		t.Error("a probe of a closed server succeeded")
	}
}
