package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/metalambda/metalambda/internal/jsonvalue"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/gatewayapi"
	"github.com/metalambda/metalambda/internal/httpapi"
	"github.com/metalambda/metalambda/internal/tracing"
)

// functionRequest is the body of POST and PUT: a Function object (metadata.name,
// labels, annotations and spec), or the spec's fields flat beside "name": {"name",
// "runtime", "source", "handler", "timeoutSeconds", "env", "envFrom", "envValueFrom",
// "history", "network", "rollout", "revisionHistoryLimit"}.
type functionRequest struct {
	Metadata *struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	Spec *fnv1.FunctionSpec `json:"spec"`
	Name string             `json:"name"`
	fnv1.FunctionSpec
}

func (req *functionRequest) name() string {
	if req.Metadata != nil && req.Metadata.Name != "" {
		return req.Metadata.Name
	}
	return req.Name
}

func (req *functionRequest) spec() fnv1.FunctionSpec {
	if req.Spec != nil {
		return *req.Spec
	}
	return req.FunctionSpec
}

func (g *Gateway) functions(namespace string) dynamic.ResourceInterface {
	return g.dyn.Resource(FunctionsGVR).Namespace(namespace)
}

func (g *Gateway) listFunctions(w http.ResponseWriter, r *http.Request) {
	list, err := g.functions(chi.URLParam(r, "namespace")).List(r.Context(), metav1.ListOptions{})
	if err != nil {
		httpapi.WriteError(w, fromAPI(err))
		return
	}
	items := make([]map[string]any, 0, len(list.Items))
	for _, item := range list.Items {
		items = append(items, item.Object)
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (g *Gateway) getFunction(w http.ResponseWriter, r *http.Request) {
	obj, err := g.functions(chi.URLParam(r, "namespace")).Get(r.Context(), chi.URLParam(r, "name"), metav1.GetOptions{})
	if err != nil {
		httpapi.WriteError(w, fromAPI(err))
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, obj.Object)
}

func (g *Gateway) createFunction(w http.ResponseWriter, r *http.Request) {
	ns := chi.URLParam(r, "namespace")
	req, err := readFunction(r)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	if err := g.store.checkRoom(ns, req.name()); err != nil {
		httpapi.WriteError(w, err)
		return
	}
	obj, err := g.validate(r, ns, req.name(), req)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	g.create(w, r, ns, obj)
}

// create creates a validated function and answers it, 201.
func (g *Gateway) create(w http.ResponseWriter, r *http.Request, ns string, obj *unstructured.Unstructured) {
	created, err := g.functions(ns).Create(r.Context(), obj, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		httpapi.WriteError(w, fromAPI(err))
		return
	}
	httpapi.WriteJSON(w, http.StatusCreated, created.Object)
}

// putFunction creates or replaces a function's spec, as faas-cli users expect. The
// flat form keeps the stored spec.history, spec.rollout and spec.revisionHistoryLimit
// unless it names them: it says what the function runs, not how it is rolled out.
func (g *Gateway) putFunction(w http.ResponseWriter, r *http.Request) {
	ns, name := chi.URLParam(r, "namespace"), chi.URLParam(r, "name")
	req, err := readFunction(r)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	if n := req.name(); n != "" && n != name {
		httpapi.WriteError(w, httpapi.NewError(http.StatusUnprocessableEntity, "invalid_name", fmt.Sprintf("the body names %q but the URL names %q", n, name)))
		return
	}
	obj, err := g.validate(r, ns, name, req)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	// The body carries no resourceVersion: a PUT replaces whatever is stored. Other
	// writers (the gateway's own status writes, the rollout driver) may write the
	// Function between the read and the update; the update then conflicts and is
	// made again from a fresh read, so the caller does not see their conflict.
	var updated *unstructured.Unstructured
	created := false
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := g.functions(ns).Get(r.Context(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			created = true
			return nil
		}
		if err != nil {
			return err
		}
		// Each try starts from the body's spec: keepSettings adds to it at the top.
		spec, _ := obj.Object["spec"].(map[string]any)
		spec = maps.Clone(spec)
		if req.Spec == nil {
			keepSettings(spec, current.Object["spec"])
		}
		current.Object["spec"] = spec
		// Labels and annotations the body names replace the stored ones; a body
		// without them (the flat form) keeps what is stored.
		if labels := req.labels(); labels != nil {
			current.SetLabels(labels)
		}
		if annotations := req.annotations(); annotations != nil {
			current.SetAnnotations(annotations)
		}
		updated, err = g.functions(ns).Update(r.Context(), current, metav1.UpdateOptions{FieldManager: fieldManager})
		return err
	})
	switch {
	case err != nil:
		httpapi.WriteError(w, fromAPI(err))
	case created:
		if aerr := g.auth.Authorize(r.Context(), httpapi.CallerFrom(r.Context()), functionAccess("create", ns)); aerr != nil {
			httpapi.WriteError(w, aerr)
			return
		}
		if err := g.store.checkRoom(ns, name); err != nil {
			httpapi.WriteError(w, err)
			return
		}
		g.create(w, r, ns, obj)
	default:
		httpapi.WriteJSON(w, http.StatusOK, updated.Object)
	}
}

// flatSettings are the fields of a spec that do not change what a call runs, and
// that the flat form of PUT (which names what runs) keeps when it leaves them out.
var flatSettings = []string{"history", "rollout", "revisionHistoryLimit"}

// keepSettings copies into spec the stored settings it leaves out.
func keepSettings(spec map[string]any, stored any) {
	old, _ := stored.(map[string]any)
	for _, field := range flatSettings {
		if _, set := spec[field]; !set && old[field] != nil {
			spec[field] = old[field]
		}
	}
}

func (g *Gateway) deleteFunction(w http.ResponseWriter, r *http.Request) {
	if err := g.functions(chi.URLParam(r, "namespace")).Delete(r.Context(), chi.URLParam(r, "name"), metav1.DeleteOptions{}); err != nil {
		httpapi.WriteError(w, fromAPI(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// validate checks a function before anything is stored: its name, runtime, source
// size, timeout, env sources, that the caller may read the Secrets and ConfigMaps
// they name, that the gateway allows the network it asks for, and that the source
// compiles.
func (g *Gateway) validate(r *http.Request, namespace, name string, req *functionRequest) (*unstructured.Unstructured, error) {
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return nil, httpapi.NewError(http.StatusUnprocessableEntity, "invalid_name", fmt.Sprintf("function name %q: %s", name, msgs[0]))
	}
	spec := req.spec()
	if err := g.checkSpec(&spec); err != nil {
		return nil, err
	}
	sources := sourcesOf(&spec)
	if err := g.checkSourceAccess(r, namespace, sources); err != nil {
		return nil, err
	}
	fn := toRuntime(namespace, name, &spec)
	if err := g.compiler.check(fn); err != nil {
		return nil, httpapi.NewError(http.StatusUnprocessableEntity, "network_not_allowed", err.Error())
	}
	fn.Env = g.trialEnv(r.Context(), fn, sources)
	compiled, err := g.compiler.Compile(fn)
	if err != nil {
		return nil, compileError(err)
	}
	compiled.Close()
	obj := &unstructured.Unstructured{}
	if err := jsonvalue.Convert(fnv1.Function{
		TypeMeta:   metav1.TypeMeta{APIVersion: fnv1.Group + "/" + fnv1.Version, Kind: fnv1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: req.labels(), Annotations: req.annotations()},
		Spec:       spec,
	}, &obj.Object); err != nil {
		return nil, err
	}
	delete(obj.Object, "status")
	unstructured.RemoveNestedField(obj.Object, "metadata", "creationTimestamp")
	return obj, nil
}

// checkSpec checks what can be checked of a spec without compiling it: a known
// runtime, a source of a size the API takes, a timeout in range, env sources and a
// rollout policy the CRD's schema accepts.
func (g *Gateway) checkSpec(spec *fnv1.FunctionSpec) error {
	if _, err := g.registry.Get(spec.Runtime); err != nil {
		return httpapi.NewError(http.StatusUnprocessableEntity, "invalid_runtime", err.Error())
	}
	switch {
	case spec.Source == "":
		return httpapi.NewError(http.StatusUnprocessableEntity, "invalid_source", "source must not be empty")
	case len(spec.Source) > fnv1.MaxSource:
		return httpapi.NewError(http.StatusRequestEntityTooLarge, "source_too_large", fmt.Sprintf("source is %d bytes; the limit is %d", len(spec.Source), fnv1.MaxSource))
	case spec.TimeoutSeconds < 0 || spec.TimeoutSeconds > 300:
		return httpapi.NewError(http.StatusUnprocessableEntity, "invalid_timeout", fmt.Sprintf("timeoutSeconds %d is not between 1 and 300", spec.TimeoutSeconds))
	}
	if errs := fnv1.ValidateEnvSources(spec); len(errs) > 0 {
		return httpapi.NewError(http.StatusUnprocessableEntity, "invalid_env", errs.ToAggregate().Error())
	}
	if errs := fnv1.ValidateRollout(spec); len(errs) > 0 {
		return httpapi.NewError(http.StatusUnprocessableEntity, "invalid_rollout", errs.ToAggregate().Error())
	}
	return nil
}

// checkSourceAccess refuses, with a 403 naming it, a Secret or ConfigMap the
// sources name that the caller may not get: through this API a function reads only
// what its author could read.
func (g *Gateway) checkSourceAccess(r *http.Request, namespace string, sources *envSources) error {
	if sources == nil {
		return nil
	}
	for _, ref := range sources.refs() {
		denied := func(user string) string {
			return fmt.Sprintf("user %q may not get %s %q in namespace %q, which %s names; a function may read only what its author may read", user, singular(ref.kind), ref.name, namespace, ref.field)
		}
		if err := g.mayGet(r.Context(), ref.kind, namespace, ref.name, denied); err != nil {
			return err
		}
	}
	return nil
}

// trialEnv is the environment a function is compiled with to check it before it is
// stored: what its sources give when the gateway can read them now, else its
// envValueFrom names set empty (so that top-level code reading them loads), then
// its plain env.
func (g *Gateway) trialEnv(ctx context.Context, fn lambda.Function, sources *envSources) map[string]string {
	if sources == nil {
		return fn.Env
	}
	namespace, _, _ := strings.Cut(fn.Name, "/")
	fromSources, err := g.store.env.resolve(ctx, fn.Name, namespace, sources)
	if err != nil {
		fromSources = map[string]string{}
		for name := range sources.EnvValueFrom {
			fromSources[name] = ""
		}
	}
	return mergeEnv(fromSources, fn.Env)
}

func (req *functionRequest) labels() map[string]string {
	if req.Metadata == nil {
		return nil
	}
	return req.Metadata.Labels
}

func (req *functionRequest) annotations() map[string]string {
	if req.Metadata == nil {
		return nil
	}
	return req.Metadata.Annotations
}

func readFunction(r *http.Request) (*functionRequest, error) {
	var req functionRequest
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, httpapi.NewError(http.StatusBadRequest, "bad_request", "the body is not a Function in JSON: "+err.Error())
	}
	return &req, nil
}

// hook serves engines: Metacontroller hook JSON in, hook JSON out.
func (g *Gateway) hook(w http.ResponseWriter, r *http.Request) {
	inv, err := g.call(r, sourceHook)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(inv.Response)
}

// invoke is a test call from the management API: the response and the logs.
func (g *Gateway) invoke(w http.ResponseWriter, r *http.Request) {
	inv, err := g.call(r, sourceInvoke)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, gatewayapi.InvokeResult{Response: inv.Response, Logs: inv.Logs, DurationMS: inv.DurationMS})
}

func (g *Gateway) invocations(w http.ResponseWriter, r *http.Request) {
	e, err := g.loaded(r.Context(), chi.URLParam(r, "namespace"), chi.URLParam(r, "name"))
	if e == nil {
		httpapi.WriteError(w, err)
		return
	}
	items, unreachable := g.recorded(r, chi.URLParam(r, "namespace"), chi.URLParam(r, "name"), e)
	httpapi.WriteJSON(w, http.StatusOK, gatewayapi.InvocationList{Items: items, Enabled: e.history.enabled(), Unreachable: unreachable})
}

// call runs the function named in the URL with the request body, and records it.
func (g *Gateway) call(r *http.Request, source string) (*Invocation, error) {
	ns, name := chi.URLParam(r, "namespace"), chi.URLParam(r, "name")
	e, err := g.loaded(r.Context(), ns, name)
	if err != nil {
		return nil, err
	}
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	u, revision := e.pick(body)
	noteRevision(r, revision)
	b := g.store.serving(r.Context(), u)
	if errors.Is(b.err, ErrEnvSourceUnavailable) {
		return nil, httpapi.NewError(http.StatusServiceUnavailable, "env_source_unavailable", b.err.Error())
	}
	if b.err != nil {
		return nil, httpapi.NewError(http.StatusServiceUnavailable, "not_ready", b.err.Error())
	}
	// The runtime checks that the body is JSON as it reads it (one pass, not two).
	start := time.Now()
	res, callErr := b.compiled.Invoke(r.Context(), body)
	if errors.Is(callErr, lambda.ErrInvalidRequest) {
		return nil, httpapi.NewError(http.StatusBadRequest, "bad_request", "the request body is not JSON: "+callErr.Error())
	}
	elapsed := time.Since(start)
	inv := &Invocation{Time: start, DurationMS: float64(elapsed.Microseconds()) / 1000, Source: source, Revision: revision, Status: http.StatusOK, Request: body, Response: res.Response, Logs: res.Logs, Replica: g.opts.Replica,
		TraceID: tracing.TraceID(trace.SpanFromContext(r.Context()))}
	if callErr != nil {
		inv.Status, inv.Error, inv.Response = http.StatusInternalServerError, callErr.Error(), nil
	}
	if e.history.enabled() {
		rec := *inv
		rec.Headers = recordedHeaders(r.Header)
		e.history.add(rec)
	}
	e.metrics.observe(inv.Status, elapsed)
	if callErr != nil {
		return nil, &httpapi.Error{Status: http.StatusInternalServerError, Code: "function_failed", Message: callErr.Error(), Logs: res.Logs}
	}
	return inv, nil
}

// loaded returns the function's loaded entry, or why there is none.
func (g *Gateway) loaded(ctx context.Context, ns, name string) (*entry, error) {
	if e := g.store.get(ns, name); e != nil {
		return e, nil
	}
	if _, err := g.functions(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		return nil, httpapi.NewError(http.StatusServiceUnavailable, "not_ready", fmt.Sprintf("function %s/%s is not loaded yet; retry in a moment", ns, name))
	}
	return nil, httpapi.NewError(http.StatusNotFound, "not_found", fmt.Sprintf("no function %s/%s", ns, name))
}
