//go:build integration

package gateway

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metalambda/metalambda/internal/engine"
	"github.com/metalambda/metalambda/internal/engineapi"
	"github.com/metalambda/metalambda/internal/kubetest"
)

// One trace from the engine's sync of a parent, through its hook call, into the
// gateway's call of the Function: the engine and the gateway each export to their
// own in-memory exporter, so only the traceparent header joins them. The sync span's
// hook-call child is the parent of the gateway's server span (same trace ID across
// the HTTP hop), which has queue-wait and worker spans under it; the engine's
// hook-call record and the gateway's invocation carry the trace ID.
func TestOneTraceFromTheEngineSyncToTheGatewayWorker(t *testing.T) {
	engineSpans, gatewaySpans := tracetest.NewInMemoryExporter(), tracetest.NewInMemoryExporter()
	g := startGateway(t, func(o *Options) { o.TracerProvider = provider(t, gatewaySpans) })
	ns := env.Namespace(t)
	ctx := kubetest.Context(t)
	env.InstallCRDs(t, kubetest.SchemalessCRD("gateway.test.metalambda.dev", "Greeting", "greetings", "greeting"))
	createFunction(t, ns, "greeter", "javascript", `function sync(request) {
  var p = request.parent;
  return {status: {ok: true}, children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: p.metadata.name + "-cm"}, data: {who: p.spec.who}}]};
}`, 0)
	fn := waitFunction(t, ns, "greeter", func(o *unstructured.Unstructured) error { return readyIs(o, "True", "Compiled") })
	hookURL, _, _ := unstructured.NestedString(fn.Object, "status", "url")

	opts := engine.Defaults()
	opts.TargetSelector = labels.SelectorFromSet(labels.Set{"test": ns})
	opts.TracerProvider = provider(t, engineSpans)
	mgr, err := engine.New(env.Config, opts, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	kubetest.Run(t, "the engine", mgr.Run, nil)
	handler, err := mgr.API(env.Kube)
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(handler)
	t.Cleanup(api.Close)

	ccGVR := schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "compositecontrollers"}
	cc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
		"metadata": map[string]any{"name": ns, "labels": map[string]any{"test": ns}},
		"spec": map[string]any{
			"generateSelector": true,
			"parentResource":   map[string]any{"apiVersion": "gateway.test.metalambda.dev/v1", "resource": "greetings"},
			"childResources":   []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": "InPlace"}}},
			"hooks":            map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": hookURL}}},
		},
	}}
	if _, err := env.Dynamic.Resource(ccGVR).Create(ctx, cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Dynamic.Resource(ccGVR).Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	greetings := schema.GroupVersionResource{Group: "gateway.test.metalambda.dev", Version: "v1", Resource: "greetings"}
	parent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.test.metalambda.dev/v1", "kind": "Greeting",
		"metadata": map[string]any{"name": "g"}, "spec": map[string]any{"who": "world"},
	}}
	if _, err := env.Dynamic.Resource(greetings).Namespace(ns).Create(ctx, parent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var chain traceChain
	kubetest.Eventually(t, 30*time.Second, "a sync of the parent traced from the engine into the gateway's worker", func(context.Context) (bool, error) {
		var err error
		chain, err = findChain(engineSpans.GetSpans(), gatewaySpans.GetSpans(), "sync Greeting "+ns+"/g", "hook "+ns+"/greeter")
		return err == nil, err
	})
	checkAttributes(t, chain.sync, map[string]string{"metalambda.controller": "CompositeController/" + ns, "metalambda.parent": ns + "/g", "metalambda.result": "ok"})
	checkAttributes(t, chain.server, map[string]string{"metalambda.function": ns + "/greeter", "metalambda.source": "hook"})
	if chain.hook.SpanKind != trace.SpanKindClient || chain.server.SpanKind != trace.SpanKindServer {
		t.Errorf("span kinds: hook call %v, gateway %v; want client and server", chain.hook.SpanKind, chain.server.SpanKind)
	}
	for _, phase := range []string{"observe", "apply children", "write parent"} {
		if len(childrenOf(engineSpans.GetSpans(), chain.sync, phase)) == 0 {
			t.Errorf("the sync span has no %q child", phase)
		}
	}
	if !startedAWorker(gatewaySpans.GetSpans(), "hook "+ns+"/greeter") {
		t.Error("no call of the function has a \"worker start\" span, though its first call starts a worker")
	}

	traceID := chain.sync.SpanContext.TraceID().String()
	calls, err := (&engineapi.Client{BaseURL: api.URL}).HookCalls(ctx, env.Config.BearerToken, engineapi.HookCallQuery{Controller: engineapi.KindComposite + "/" + ns})
	if err != nil {
		t.Fatal(err)
	}
	if !hasCall(calls.Items, func(c engineapi.HookCall) bool { return c.TraceID == traceID }) {
		t.Errorf("no hook call the engine recorded carries trace %s: %+v", traceID, traceIDs(calls.Items))
	}
	e := g.gw.store.get(ns, "greeter")
	if e == nil {
		t.Fatal("the function is not loaded")
	}
	if !hasCall(e.history.list(), func(inv Invocation) bool { return inv.TraceID == traceID && inv.Source == sourceHook }) {
		t.Errorf("no invocation the gateway recorded carries trace %s", traceID)
	}
}

// provider is a tracer provider that exports every span to exp as it ends.
func provider(t *testing.T, exp *tracetest.InMemoryExporter) trace.TracerProvider {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

// traceChain is one sync traced across the HTTP hop, from the engine's sync span
// to the gateway's worker span.
type traceChain struct {
	sync, hook, server, queue, worker tracetest.SpanStub
}

// findChain finds a sync span named syncName whose "hook sync" child is the remote
// parent of a gateway span named serverName with "queue wait" and "worker" children.
func findChain(engineSpans, gatewaySpans tracetest.SpanStubs, syncName, serverName string) (traceChain, error) {
	seen := map[string]int{}
	for _, s := range engineSpans {
		seen[s.Name]++
		if s.Name != syncName {
			continue
		}
		for _, h := range childrenOf(engineSpans, s, "hook sync") {
			for _, srv := range childrenOf(gatewaySpans, h, serverName) {
				queue, worker := childrenOf(gatewaySpans, srv, "queue wait"), childrenOf(gatewaySpans, srv, "worker")
				if srv.Parent.IsRemote() && len(queue) > 0 && len(worker) > 0 {
					return traceChain{sync: s, hook: h, server: srv, queue: queue[0], worker: worker[0]}, nil
				}
			}
		}
	}
	var gw []string
	for _, s := range gatewaySpans {
		gw = append(gw, fmt.Sprintf("%s (parent %s)", s.Name, s.Parent.SpanID()))
	}
	return traceChain{}, fmt.Errorf("engine spans by name %v; gateway spans %v", seen, gw)
}

// childrenOf are the spans named name whose parent is parent, in its trace.
func childrenOf(spans tracetest.SpanStubs, parent tracetest.SpanStub, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name && s.Parent.SpanID() == parent.SpanContext.SpanID() && s.SpanContext.TraceID() == parent.SpanContext.TraceID() {
			out = append(out, s)
		}
	}
	return out
}

// startedAWorker reports whether some gateway span named serverName has a "worker
// start" child.
func startedAWorker(spans tracetest.SpanStubs, serverName string) bool {
	for _, s := range spans {
		if s.Name == serverName && len(childrenOf(spans, s, "worker start")) > 0 {
			return true
		}
	}
	return false
}

func checkAttributes(t *testing.T, s tracetest.SpanStub, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, kv := range s.Attributes {
		if kv.Value.Type() == attribute.STRING {
			got[string(kv.Key)] = kv.Value.AsString()
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("span %q: attribute %s = %q, want %q (all: %v)", s.Name, k, got[k], v, got)
		}
	}
}

func hasCall[T any](items []T, match func(T) bool) bool {
	for _, it := range items {
		if match(it) {
			return true
		}
	}
	return false
}

func traceIDs(calls []engineapi.HookCall) []string {
	out := make([]string, 0, len(calls))
	for _, c := range calls {
		out = append(out, c.TraceID)
	}
	return out
}
