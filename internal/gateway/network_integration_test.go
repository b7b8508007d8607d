//go:build integration

package gateway

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/kubetest"
)

// pyConnect is a Python function that tries to connect to a port on the host's
// loopback and names its one child after what happened ("connected" or the
// error's name, in lower case).
const pyConnect = `import socket

def sync(request):
    try:
        socket.create_connection(("127.0.0.1", %d), timeout=2).close()
        result = "connected"
    except OSError as e:
        result = type(e).__name__.lower()
    return {"children": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": result}}]}
`

// TestFunctionNetwork: a Function has the host's network only when it asks for it
// and the gateway allows it; asking on a gateway that does not allow it is refused,
// by the API and in the Function's status.
func TestFunctionNetwork(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	source := strings.Replace(pyConnect, "%d", strconv.Itoa(l.Addr().(*net.TCPAddr).Port), 1)

	t.Run("not allowed", func(t *testing.T) {
		g := startGateway(t)
		ns := env.Namespace(t)
		base := "/v1/namespaces/" + ns + "/functions"
		r := g.do(t, "POST", base, g.token, map[string]any{"name": "online", "runtime": "python", "source": source, "network": true})
		if msg, _ := r.body["message"].(string); r.status != http.StatusUnprocessableEntity || r.body["error"] != "network_not_allowed" || !strings.Contains(msg, "--allow-function-network") {
			t.Errorf("create asking for network = %d %s, want 422 network_not_allowed naming --allow-function-network", r.status, r.raw)
		}
		if got := g.do(t, "GET", base+"/online", g.token, nil); got.status != http.StatusNotFound {
			t.Errorf("a refused function was stored (%d)", got.status)
		}
		// An update that asks for it is refused too, and the stored function stays.
		if r := g.do(t, "PUT", base+"/offline", g.token, map[string]any{"name": "offline", "runtime": "python", "source": source}); r.status != http.StatusCreated {
			t.Fatalf("PUT offline = %d %s", r.status, r.raw)
		}
		r = g.do(t, "PUT", base+"/offline", g.token, map[string]any{"name": "offline", "runtime": "python", "source": source, "network": true})
		if r.status != http.StatusUnprocessableEntity || r.body["error"] != "network_not_allowed" {
			t.Errorf("update asking for network = %d %s, want 422 network_not_allowed", r.status, r.raw)
		}
		g.waitHook(t, ns, "offline", "connectionrefusederror")

		// Through kubectl nothing refuses it; the status says why it is not served.
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "metalambda.dev/v1alpha1", "kind": "Function",
			"metadata": map[string]any{"name": "online"},
			"spec":     map[string]any{"runtime": "python", "source": source, "network": true},
		}}
		if _, err := env.Dynamic.Resource(FunctionsGVR).Namespace(ns).Create(kubetest.Context(t), obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		fn := waitFunction(t, ns, "online", func(o *unstructured.Unstructured) error { return readyIs(o, "False", "NetworkNotAllowed") })
		if msg := readyMessage(fn); !strings.Contains(msg, "--allow-function-network") || !strings.Contains(msg, ns+"/online") {
			t.Errorf("Ready message %q names neither the flag nor the function", msg)
		}
		if r := g.do(t, "POST", "/hooks/"+ns+"/online", "", hookRequest("p")); r.status != http.StatusServiceUnavailable {
			t.Errorf("hook of a refused function = %d %s, want 503", r.status, r.raw)
		}
	})

	t.Run("allowed", func(t *testing.T) {
		g := startGateway(t, func(o *Options) { o.AllowFunctionNetwork = true })
		ns := env.Namespace(t)
		base := "/v1/namespaces/" + ns + "/functions"
		for _, tt := range []struct {
			name    string
			network bool
			want    string
		}{
			{"online", true, "connected"},
			{"offline", false, "connectionrefusederror"},
		} {
			if r := g.do(t, "POST", base, g.token, map[string]any{"name": tt.name, "runtime": "python", "source": source, "network": tt.network}); r.status != http.StatusCreated {
				t.Fatalf("create %s = %d %s", tt.name, r.status, r.raw)
			}
			g.waitHook(t, ns, tt.name, tt.want)
		}
		// Turning the network off replaces the workers.
		if r := g.do(t, "PUT", base+"/online", g.token, map[string]any{"name": "online", "runtime": "python", "source": source}); r.status != http.StatusOK {
			t.Fatalf("PUT online without network = %d %s", r.status, r.raw)
		}
		g.waitHook(t, ns, "online", "connectionrefusederror")
	})
}
