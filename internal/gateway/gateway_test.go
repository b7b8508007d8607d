package gateway

import (
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/metalambda/metalambda/internal/gateway/dashboard"
)

// TestOpenAPIDescribesEveryRoute keeps /openapi.json and the route table in step.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	g := &Gateway{opts: Options{MaxBodyBytes: 1 << 20}}
	router := g.routes(http.NotFoundHandler()).(chi.Routes)
	var routes []string
	err := chi.Walk(router, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if route == "/metrics" && method != http.MethodGet {
			return nil // Handle registers every method; the document names GET
		}
		if strings.HasPrefix(route, dashboard.Prefix) {
			return nil // the dashboard's HTML pages are not part of the API
		}
		routes = append(routes, strings.ToLower(method)+" "+strings.TrimSuffix(route, "/"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, item := range openAPI().Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, strings.ToLower(method)+" "+path)
		}
	}
	sort.Strings(routes)
	sort.Strings(documented)
	if diff := cmp.Diff(documented, routes); diff != "" {
		t.Errorf("routes and /openapi.json differ (-documented +served):\n%s", diff)
	}
}

// TestHistoryKeepsTheNewestFirst: a history holds nothing until a call, grows
// to its size and then keeps the newest, newest first.
func TestHistoryKeepsTheNewestFirst(t *testing.T) {
	h := newHistory(6)
	if cap(h.items) != 0 {
		t.Errorf("a history never written holds room for %d invocations", cap(h.items))
	}
	for n := 1; n <= 15; n++ {
		h.add(Invocation{Status: 200 + n})
		var got, want []int
		for _, inv := range h.list() {
			got = append(got, inv.Status)
		}
		for i := n; i > max(n-6, 0); i-- {
			want = append(want, 200+i)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("history after %d calls (-want +got):\n%s", n, diff)
		}
		if cap(h.items) > 6 {
			t.Fatalf("a history of 6 holds room for %d", cap(h.items))
		}
	}
	big := make([]byte, maxRecordedBody+1)
	for i := range big {
		big[i] = 'a'
	}
	h.add(Invocation{Request: append(append([]byte(`"`), big...), '"')})
	if req := string(h.list()[0].Request); !strings.Contains(req, "truncated") {
		t.Errorf("a big request was kept whole (%d bytes)", len(req))
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, url := range []string{"", "127.0.0.1:8081", "ftp://x"} {
		o := Options{PublicURL: url}
		if err := o.Validate(); err == nil {
			t.Errorf("public URL %q accepted", url)
		}
	}
	o := Defaults()
	o.PublicURL = "http://127.0.0.1:8081/"
	o.normalize()
	if err := o.Validate(); err != nil || o.PublicURL != "http://127.0.0.1:8081" {
		t.Errorf("valid URL: %v, %q", err, o.PublicURL)
	}
}
