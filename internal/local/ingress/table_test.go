package ingress

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// request is one request to route and the backend that should serve it ("" for none).
type request struct {
	host, path, want string
}

// checkRoutes builds a table of ings for className and routes each request.
func checkRoutes(t *testing.T, className string, ings []*networkingv1.Ingress, reqs []request) {
	t.Helper()
	tbl := buildTable(world{ingresses: ings}, className, nil)
	for _, r := range reqs {
		got := ""
		if rt, ok := tbl.match(requestHost(r.host), r.path); ok {
			got = rt.backend.name
		}
		if want := backendOf(r.want); got != want {
			t.Errorf("host %q path %q: routed to %q, want %q", r.host, r.path, got, want)
		}
	}
}

// backendOf is the backend name serviceBackend(service) gets in testNS.
func backendOf(service string) string {
	if service == "" {
		return ""
	}
	return backendName(testNS, *serviceBackend(service))
}

func TestMatchHosts(t *testing.T) {
	exactIng := newIngress("exact", rule("foo.example.com", prefix("/api", "exact")))
	wildIng := newIngress("wild", rule("*.example.com", prefix("/", "wild")))
	anyIng := newIngress("any", rule("", prefix("/", "any")))
	tests := []struct {
		name string
		ings []*networkingv1.Ingress
		reqs []request
	}{{
		name: "exact, then wildcard, then any host",
		ings: []*networkingv1.Ingress{anyIng, wildIng, exactIng},
		reqs: []request{
			{"foo.example.com", "/api/v1", "exact"},
			{"FOO.Example.com:8080", "/api", "exact"},
			{"foo.example.com.", "/api", "exact"},
			{"foo.example.com", "/other", "wild"}, // no path of the exact host matches
			{"bar.example.com", "/api", "wild"},
			{"a.b.example.com", "/", "any"}, // a wildcard covers one label
			{"example.com", "/", "any"},
			{"other.org", "/x", "any"},
			{"10.0.0.1:80", "/", "any"},
			{"[::1]:80", "/", "any"},
		},
	}, {
		name: "no rule without host",
		ings: []*networkingv1.Ingress{wildIng, exactIng},
		reqs: []request{
			{"foo.example.com", "/api", "exact"},
			{"x.example.com", "/", "wild"},
			{"a.b.example.com", "/", ""},
			{"example.com", "/", ""},
			{"foo.example.org", "/api", ""},
		},
	}, {
		name: "a host on several rules and Ingresses",
		ings: []*networkingv1.Ingress{
			newIngress("one", rule("foo.example.com", prefix("/a", "a")), rule("bar.example.com", prefix("/", "bar"))),
			newIngress("two", rule("foo.example.com", prefix("/b", "b"))),
		},
		reqs: []request{
			{"foo.example.com", "/a", "a"},
			{"foo.example.com", "/b", "b"},
			{"foo.example.com", "/c", ""},
			{"bar.example.com", "/c", "bar"},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkRoutes(t, "", tt.ings, tt.reqs) })
	}
}

func TestMatchPaths(t *testing.T) {
	tests := []struct {
		name  string
		paths []networkingv1.HTTPIngressPath
		reqs  []request
	}{{
		name:  "Prefix is element-wise",
		paths: []networkingv1.HTTPIngressPath{prefix("/foo", "foo")},
		reqs: []request{
			{"h", "/foo", "foo"}, {"h", "/foo/", "foo"}, {"h", "/foo/bar", "foo"},
			{"h", "/foobar", ""}, {"h", "/", ""}, {"h", "/fo", ""},
		},
	}, {
		name:  "Prefix with a trailing slash",
		paths: []networkingv1.HTTPIngressPath{prefix("/foo/", "foo")},
		reqs:  []request{{"h", "/foo", "foo"}, {"h", "/foo/bar", "foo"}, {"h", "/foobar", ""}},
	}, {
		name:  "Prefix / matches every path",
		paths: []networkingv1.HTTPIngressPath{prefix("/", "root")},
		reqs:  []request{{"h", "/", "root"}, {"h", "/a/b/c", "root"}},
	}, {
		name:  "Exact is the whole path",
		paths: []networkingv1.HTTPIngressPath{exact("/foo", "foo")},
		reqs:  []request{{"h", "/foo", "foo"}, {"h", "/foo/", ""}, {"h", "/foo/bar", ""}, {"h", "/FOO", ""}},
	}, {
		name:  "ImplementationSpecific is Prefix",
		paths: []networkingv1.HTTPIngressPath{implSpecific("/foo", "foo")},
		reqs:  []request{{"h", "/foo", "foo"}, {"h", "/foo/bar", "foo"}, {"h", "/foobar", ""}},
	}, {
		name:  "the longest path wins",
		paths: []networkingv1.HTTPIngressPath{prefix("/", "root"), prefix("/foo/bar", "foobar"), prefix("/foo", "foo")},
		reqs: []request{
			{"h", "/foo/bar/baz", "foobar"}, {"h", "/foo/bar", "foobar"}, {"h", "/foo/baz", "foo"},
			{"h", "/foo", "foo"}, {"h", "/foobar", "root"}, {"h", "/", "root"},
		},
	}, {
		name:  "Exact before Prefix at equal length",
		paths: []networkingv1.HTTPIngressPath{prefix("/foo", "prefix"), exact("/foo", "exact"), prefix("/", "root")},
		reqs:  []request{{"h", "/foo", "exact"}, {"h", "/foo/x", "prefix"}, {"h", "/x", "root"}},
	}, {
		name:  "a longer Prefix beats a shorter Exact",
		paths: []networkingv1.HTTPIngressPath{exact("/foo", "exact"), prefix("/foo/", "prefix")},
		reqs:  []request{{"h", "/foo", "exact"}, {"h", "/foo/", "prefix"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkRoutes(t, "", []*networkingv1.Ingress{newIngress("ing", rule("", tt.paths...))}, tt.reqs)
		})
	}
}

func TestMatchAcrossIngresses(t *testing.T) {
	tests := []struct {
		name string
		ings []*networkingv1.Ingress
		reqs []request
	}{{
		name: "the oldest Ingress wins a tie",
		ings: []*networkingv1.Ingress{
			newIngress("a-new", age(5), rule("h", prefix("/x", "new"))),
			newIngress("z-old", age(1), rule("h", prefix("/x", "old"))),
		},
		reqs: []request{{"h", "/x", "old"}},
	}, {
		name: "then namespace/name",
		ings: []*networkingv1.Ingress{
			newIngress("b", rule("h", prefix("/x", "b"))),
			newIngress("a", inNamespace("zz"), rule("h", prefix("/x", "zz-a"))),
			newIngress("a", rule("h", prefix("/x", "a"))),
		},
		reqs: []request{{"h", "/x", "a"}},
	}, {
		name: "a longer path in a newer Ingress beats an older one",
		ings: []*networkingv1.Ingress{
			newIngress("old", age(1), rule("h", prefix("/", "old"))),
			newIngress("new", age(2), rule("h", prefix("/api", "new"))),
		},
		reqs: []request{{"h", "/api/x", "new"}, {"h", "/x", "old"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkRoutes(t, "", tt.ings, tt.reqs) })
	}
}

func TestMatchDefaultBackend(t *testing.T) {
	a := newIngress("a", age(1), rule("a.example.com", prefix("/api", "a-api")), defaultBackend("a-default"))
	b := newIngress("b", age(2), rule("*.b.example.com", prefix("/api", "b-api")), defaultBackend("b-default"))
	only := newIngress("only", age(3), defaultBackend("only"))
	catchAll := newIngress("catch-all", age(4), rule("", prefix("/", "catch-all")))
	tests := []struct {
		name string
		ings []*networkingv1.Ingress
		reqs []request
	}{{
		name: "an Ingress with a rule for the host first, then the oldest",
		ings: []*networkingv1.Ingress{a, b},
		reqs: []request{
			{"a.example.com", "/api", "a-api"},
			{"a.example.com", "/other", "a-default"},
			{"x.b.example.com", "/api", "b-api"},
			{"x.b.example.com", "/other", "b-default"}, // b is newer, but it names the host
			{"c.example.com", "/api", "a-default"},
		},
	}, {
		name: "an Ingress with only a default backend serves everything else",
		ings: []*networkingv1.Ingress{only},
		reqs: []request{{"any.host", "/", "only"}, {"", "/x", "only"}},
	}, {
		name: "rules of any Ingress before default backends",
		ings: []*networkingv1.Ingress{a, catchAll},
		reqs: []request{{"a.example.com", "/other", "catch-all"}, {"a.example.com", "/api", "a-api"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkRoutes(t, "", tt.ings, tt.reqs) })
	}
}

func TestClassFiltering(t *testing.T) {
	ings := []*networkingv1.Ingress{
		newIngress("ours", class("metalambda"), rule("ours", prefix("/", "ours"))),
		newIngress("none", rule("none", prefix("/", "none"))),
		newIngress("nginx", class("nginx"), rule("nginx", prefix("/", "nginx"))),
		newIngress("annotated-nginx", classAnnotated("nginx"), rule("annotated-nginx", prefix("/", "annotated-nginx"))),
		newIngress("annotated-ours", classAnnotated("metalambda"), rule("annotated-ours", prefix("/", "annotated-ours"))),
		newIngress("field-wins", classAnnotated("metalambda"), class("nginx"), rule("field-wins", prefix("/", "field-wins"))),
		newIngress("nginx-default", class("nginx"), defaultBackend("nginx-default")),
	}
	t.Run("one class and Ingresses without class", func(t *testing.T) {
		checkRoutes(t, "metalambda", ings, []request{
			{"ours", "/", "ours"},
			{"none", "/", "none"},
			{"nginx", "/", ""},
			{"annotated-nginx", "/", ""},
			{"annotated-ours", "/", "annotated-ours"},
			{"field-wins", "/", ""},
		})
	})
	t.Run("every class", func(t *testing.T) {
		checkRoutes(t, "", ings, []request{
			{"ours", "/", "ours"},
			{"none", "/", "none"},
			{"nginx", "/", "nginx"},
			{"annotated-nginx", "/", "annotated-nginx"},
			{"field-wins", "/", "field-wins"},
			{"unknown", "/", "nginx-default"},
		})
	})
}

func TestResolveBackends(t *testing.T) {
	unnamed := newService("unnamed", corev1.ServicePort{Port: 80})
	external := newService("external")
	external.Spec.Type = corev1.ServiceTypeExternalName
	w := world{
		services: []*corev1.Service{newService("web"), newService("empty"), newService("down"), newService("renamed"), newService("replaced"), newService("drained"), unnamed, external},
		slices: []*discoveryv1.EndpointSlice{
			newSlice("web-1", "web", ready("10.0.0.1"), notReady("10.0.0.2"), unknown("10.0.0.3")),
			newSlice("web-2", "web", ready("10.0.0.4"), ready("10.0.0.1")),
			newSlice("down-1", "down", notReady("10.0.1.1")),
			newSlice("replaced-1", "replaced", draining("10.0.4.1"), notReady("10.0.4.2")),
			newSlice("drained-1", "drained", draining("10.0.5.1"), ready("10.0.5.2")),
			newSliceWithPort("renamed-1", "renamed", "metrics", 9090, ready("10.0.2.1")),
			newSliceWithPort("unnamed-1", "unnamed", "", 9090, ready("10.0.3.1")),
		},
	}
	resource := networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{Kind: "Bucket", Name: "b"}}
	tests := []struct {
		name            string
		backend         networkingv1.IngressBackend
		wantName        string
		wantEndpoints   []string
		wantUnavailable string
	}{
		{"port by number", *serviceBackend("web"), "ns/web:80", []string{"10.0.0.1:8080", "10.0.0.3:8080", "10.0.0.4:8080"}, ""},
		{"port by name", *serviceBackend("web:http"), "ns/web:http", []string{"10.0.0.1:8080", "10.0.0.3:8080", "10.0.0.4:8080"}, ""},
		{"unnamed port", *serviceBackend("unnamed"), "ns/unnamed:80", []string{"10.0.3.1:9090"}, ""},
		{"no such Service", *serviceBackend("missing"), "ns/missing:80", nil, "no such Service"},
		{"no such port", *serviceBackend("web:grpc"), "ns/web:grpc", nil, "port not found (the Service has ports http/80)"},
		{"no slices", *serviceBackend("empty"), "ns/empty:80", nil, "no ready endpoints"},
		{"no ready endpoint", *serviceBackend("down"), "ns/down:80", nil, "no ready endpoints"},
		{"none ready: the one serving as it terminates", *serviceBackend("replaced"), "ns/replaced:80", []string{"10.0.4.1:8080"}, ""},
		{"a ready one: not the terminating one", *serviceBackend("drained"), "ns/drained:80", []string{"10.0.5.2:8080"}, ""},
		{"slice port of another name", *serviceBackend("renamed"), "ns/renamed:80", nil, "no ready endpoints"},
		{"ExternalName", *serviceBackend("external"), "ns/external:80", nil, "ExternalName Services are not supported"},
		{"resource", resource, "ns/Bucket/b", nil, "only Service backends are supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := newBuilder(w, nil).backend(testNS, tt.backend)
			got := []any{be.name, be.endpoints, be.unavailable}
			if diff := cmp.Diff([]any{tt.wantName, tt.wantEndpoints, tt.wantUnavailable}, got); diff != "" {
				t.Errorf("backend (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRoundRobinSurvivesRebuilds(t *testing.T) {
	w := world{
		ingresses: []*networkingv1.Ingress{newIngress("ing", rule("", prefix("/", "web")), rule("other", prefix("/", "web")))},
		services:  []*corev1.Service{newService("web")},
		slices:    []*discoveryv1.EndpointSlice{newSlice("web-1", "web", ready("10.0.0.1"), ready("10.0.0.2"), ready("10.0.0.3"))},
	}
	tbl := buildTable(w, "", nil)
	var got []string
	for _, host := range []string{"h", "other", "h"} { // two rules, one backend: one rotation
		rt, _ := tbl.match(host, "/")
		got = append(got, rt.backend.pick())
	}
	tbl = buildTable(w, "", tbl)
	for range 3 {
		rt, _ := tbl.match("h", "/")
		got = append(got, rt.backend.pick())
	}
	want := []string{"10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080", "10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("endpoints picked (-want +got):\n%s", diff)
	}
}
