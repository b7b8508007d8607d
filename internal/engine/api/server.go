package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"k8s.io/client-go/kubernetes"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/engineapi"
	"github.com/metalambda/metalambda/internal/httpapi"
)

// Bounds of GET /api/v1/hookcalls.
const (
	defaultHookCallLimit = 100
	maxHookCallLimit     = 1000
)

// server serves the engine's API (package engineapi holds its types): the hook call
// history, controller summaries and parent details, each item shown only when the
// caller may get it (SubjectAccessReview as the caller), and syncs on demand of the
// parents the caller may update.
type server struct {
	engine Engine
	calls  *History // nil: no calls are recorded
	auth   *apiAuth
}

// New returns the handler of the API of engine, whose hook calls calls records (nil
// when it records none). kube reviews the callers' tokens and access; the engine's own
// identity needs create on tokenreviews and subjectaccessreviews.
func New(engine Engine, calls *History, kube kubernetes.Interface) (http.Handler, error) {
	auth, err := newAPIAuth(kube, httpapi.AuthOptions{})
	if err != nil {
		return nil, fmt.Errorf("engine API: %w", err)
	}
	return (&server{engine: engine, calls: calls, auth: auth}).routes(), nil
}

// routes is the API's whole route table.
func (s *server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeAPIJSON(w, map[string]string{"status": "ok"})
	})
	r.Route("/api/v1", func(r chi.Router) {
		r.Get("/controllers", s.authenticated(checkListQuery, s.controllers))
		r.Get("/controllers/{kind}/{name}", s.authenticated(checkControllerPath, s.controller))
		r.Get("/controllers/{kind}/{name}/parents", s.authenticated(checkControllerPath, s.parents))
		r.Route("/namespaces/{namespace}/controllers", func(r chi.Router) {
			r.Get("/", s.authenticated(checkControllerPath, s.controllers))
			r.Get("/{kind}/{name}", s.authenticated(checkControllerPath, s.controller))
			r.Get("/{kind}/{name}/parents", s.authenticated(checkControllerPath, s.parents))
			r.Get("/{kind}/{name}/parents/{parent}", s.authenticated(checkControllerPath, s.namespacedParent))
			r.Post("/{kind}/{name}/sync", s.authenticated(checkSync, s.sync))
		})
		r.Get("/hookcalls", s.authenticated(func(r *http.Request) error { _, err := parseHookCallQuery(r); return err }, s.hookCalls))
		r.Get("/parents/{kind}/{name}/{namespace}/{parent}", s.authenticated(checkParentPath, s.parent))
		r.Post("/controllers/{kind}/{name}/sync", s.authenticated(checkSync, s.sync))
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, httpapi.NewError(http.StatusNotFound, "not_found", "no route "+r.Method+" "+r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, httpapi.NewError(http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed on "+r.URL.Path))
	})
	return r
}

// authedHandler is a handler that knows its caller and answers a value or an error.
type authedHandler func(ctx context.Context, c *caller, r *http.Request) (any, error)

// authenticated serves h to an authenticated caller; check, when set, first answers
// 400 for a request whose path or query no object can match, before any review.
func (s *server) authenticated(check func(*http.Request) error, h authedHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if check != nil {
			if err := check(r); err != nil {
				writeAPIError(w, err)
				return
			}
		}
		c, err := s.auth.authenticate(r)
		if err == nil && !s.engine.Ready() {
			err = s.notReady()
		}
		var out any
		if err == nil {
			out, err = h(r.Context(), c, r)
		}
		if err != nil {
			writeAPIError(w, err)
			return
		}
		writeAPIJSON(w, out)
	}
}

// notReady is the 503 of an engine that runs no controllers: a standby replica, which
// names the leader, or an engine that is starting.
func (s *server) notReady() error {
	leader, standby := s.engine.Standby()
	switch {
	case standby && leader != "":
		return httpapi.NewError(http.StatusServiceUnavailable, "not_leader", fmt.Sprintf("this engine is a standby replica under leader election; the leader, %q, runs the controllers and serves this API (reach it through the Service of --api-service)", leader))
	case standby:
		return httpapi.NewError(http.StatusServiceUnavailable, "not_leader", "this engine is a standby replica under leader election, and no leader is known yet; try again shortly")
	}
	return httpapi.NewError(http.StatusServiceUnavailable, "not_ready", "the engine is starting; try again shortly")
}

// controllers lists the controllers this engine serves that the caller may see: the
// cluster-scoped ones it may get, the namespaced ones of the namespaces where it may
// list their kind. A namespace in the path or the query (?namespace=NS) keeps the
// namespaced controllers of that namespace alone.
func (s *server) controllers(ctx context.Context, c *caller, r *http.Request) (any, error) {
	namespace := chi.URLParam(r, "namespace")
	if namespace == "" {
		namespace = r.URL.Query().Get("namespace")
	}
	out := engineapi.ControllerList{Items: []engineapi.ControllerSummary{}, HistoryEnabled: s.calls != nil}
	for _, obj := range s.engine.Controllers() {
		if namespace != "" && obj.GetNamespace() != namespace {
			continue
		}
		x := controllerAccess(obj.GetKind(), obj.GetNamespace(), obj.GetName())
		if x.namespace != "" {
			x.verb, x.name = "list", ""
		}
		ok, err := c.may(ctx, x)
		if err != nil {
			return nil, err
		}
		if ok {
			out.Items = append(out.Items, s.summary(obj))
		}
	}
	return out, nil
}

// hookCalls lists recorded calls, newest first, that the caller may see: those of a
// controller and a parent it may both get.
func (s *server) hookCalls(ctx context.Context, c *caller, r *http.Request) (any, error) {
	q, err := parseHookCallQuery(r)
	if err != nil {
		return nil, err
	}
	calls := s.calls
	var authErr error
	keep := func(rc *recordedCall) bool {
		if authErr != nil || !q.matches(rc) {
			return false
		}
		ok, err := s.mayseeCall(ctx, c, rc)
		authErr = err
		return ok
	}
	shown, previous := calls.list(q.since, q.limit, keep)
	if authErr != nil {
		return nil, authErr
	}
	out := engineapi.HookCallList{Items: make([]engineapi.HookCall, len(shown)), LatestID: calls.lastID(), HistoryEnabled: calls != nil}
	for i := range shown {
		out.Items[i] = callView(&shown[i], &previous[i])
	}
	return out, nil
}

func (s *server) mayseeCall(ctx context.Context, c *caller, rc *recordedCall) (bool, error) {
	info := rc.call.Info
	ref := callController(info.ControllerType, info.Controller)
	if ok, err := c.may(ctx, controllerAccess(ref.Kind, ref.Namespace, ref.Name)); !ok || err != nil {
		return false, err
	}
	res, err := s.engine.Resource(info.ParentAPIVersion, info.Parent.Kind)
	if err != nil {
		return false, nil // a resource that is gone cannot be authorized
	}
	return c.may(ctx, access{group: res.Group, resource: res.Resource, namespace: info.Parent.Namespace, name: info.Parent.Name})
}

// hookCallQuery is a parsed GET /api/v1/hookcalls query.
type hookCallQuery struct {
	kind, name, namespace, parent string
	since                         uint64
	limit                         int
}

func parseHookCallQuery(r *http.Request) (hookCallQuery, error) {
	v := r.URL.Query()
	q := hookCallQuery{namespace: v.Get("namespace"), parent: v.Get("parent"), limit: defaultHookCallLimit}
	if ctl := v.Get("controller"); ctl != "" {
		kind, name, ok := strings.Cut(ctl, "/")
		q.kind = controllerKind(kind)
		ctlNamespace := ""
		if engineapi.Namespaced(q.kind) {
			ctlNamespace, name, ok = strings.Cut(name, "/")
		}
		if !ok || q.kind == "" || name == "" {
			return q, httpapi.NewError(http.StatusBadRequest, "bad_request", "controller must be KIND/NAME with KIND CompositeController or DecoratorController, or KIND/NAMESPACE/NAME with KIND NamespacedCompositeController or NamespacedDecoratorController, got "+strconv.Quote(ctl))
		}
		if err := httpapi.CheckNames(ctlNamespace, name); err != nil {
			return q, err
		}
		// The engine records a namespaced controller's calls as namespace/name.
		q.name = name
		if ctlNamespace != "" {
			q.name = ctlNamespace + "/" + name
		}
	}
	if err := httpapi.CheckNames(q.namespace, q.parent); err != nil {
		return q, err
	}
	if since := v.Get("since"); since != "" {
		n, err := strconv.ParseUint(since, 10, 64)
		if err != nil {
			return q, httpapi.NewError(http.StatusBadRequest, "bad_request", "since must be a call id (a whole number), got "+strconv.Quote(since))
		}
		q.since = n
	}
	if limit := v.Get("limit"); limit != "" {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 || n > maxHookCallLimit {
			return q, httpapi.NewError(http.StatusBadRequest, "bad_request", "limit must be a number from 1 to "+strconv.Itoa(maxHookCallLimit)+", got "+strconv.Quote(limit))
		}
		q.limit = n
	}
	return q, nil
}

func (q hookCallQuery) matches(rc *recordedCall) bool {
	info := rc.call.Info
	return (q.kind == "" || (info.ControllerType == q.kind && info.Controller == q.name)) &&
		(q.namespace == "" || info.Parent.Namespace == q.namespace) &&
		(q.parent == "" || info.Parent.Name == q.parent)
}

// checkParentPath answers 400 for a parent path no object can match: a kind that is
// no controller kind, names that are no DNS-1123 subdomains, a namespace ("-" for
// none) that is no DNS-1123 label.
func checkParentPath(r *http.Request) error {
	if err := checkClusterKind(r); err != nil {
		return err
	}
	if err := httpapi.CheckNames("", chi.URLParam(r, "name")); err != nil {
		return err
	}
	namespace := chi.URLParam(r, "namespace")
	if namespace == "-" {
		namespace = ""
	}
	if err := httpapi.CheckNames(namespace, chi.URLParam(r, "parent")); err != nil {
		return err
	}
	return nil
}

// parent shows one parent of a controller with its children. The caller is
// authorized before anything is looked up: on the controller the path names, then
// on the parent's name among the controller's parent resources. Only parents of the
// resources it may get are looked for, so that a caller that may get none gets 403
// whether the parent exists or not, and a 404 or 409 tells nothing of objects it may
// not get.
func (s *server) parent(ctx context.Context, c *caller, r *http.Request) (any, error) {
	ref := engineapi.ControllerRef{Kind: controllerKind(chi.URLParam(r, "kind")), Name: chi.URLParam(r, "name")}
	namespace, parentName := chi.URLParam(r, "namespace"), chi.URLParam(r, "parent")
	if namespace == "-" {
		namespace = ""
	}
	return s.showParent(ctx, c, r, ref, namespace, parentName)
}

// showParent is the parent namespace/parentName of the controller ref names, as
// parent shows it.
func (s *server) showParent(ctx context.Context, c *caller, r *http.Request, ref engineapi.ControllerRef, namespace, parentName string) (any, error) {
	ctl, err := s.runningController(ctx, c, ref)
	if err != nil {
		return nil, err
	}
	mayGet, err := mayOnParent(ctx, c, ctl, "", namespace, parentName)
	if err != nil {
		return nil, err
	}
	var found []Parent
	for _, p := range ctl.Parents(namespace, parentName, r.URL.Query().Get("kind")) {
		if mayGet[p.Resource] {
			found = append(found, p)
		}
	}
	parent, err := oneParent(found, ref, namespace, parentName, "add ?kind=KIND")
	if err != nil {
		return nil, err
	}
	detail := parentDetail(ref, parent.Object, ctl.ParentState(parent))
	shown := detail.Children[:0]
	for _, child := range detail.Children {
		ok, err := c.may(ctx, childAccess(ctl, child.ObjectRef))
		if err != nil {
			return nil, err
		}
		if ok {
			shown = append(shown, child)
		}
	}
	detail.Children = shown
	return detail, nil
}

// mayOnParent are the parent resources of ctl in which the caller may get (or verb,
// when set) the parent namespace/name, or a 403 when there is none.
func mayOnParent(ctx context.Context, c *caller, ctl Controller, verb, namespace, name string) (map[Resource]bool, error) {
	out := map[Resource]bool{}
	var denied access
	for _, res := range ctl.ParentResources() {
		x := access{verb: verb, group: res.Group, resource: res.Resource, namespace: namespace, name: name}
		ok, err := c.may(ctx, x)
		if err != nil {
			return nil, err
		}
		if ok {
			out[res] = true
		} else if denied.resource == "" {
			denied = x
		}
	}
	if len(out) == 0 && denied.resource != "" {
		return nil, c.forbidden(denied)
	}
	return out, nil
}

func mustMay(ctx context.Context, c *caller, x access) error {
	ok, err := c.may(ctx, x)
	if err != nil {
		return err
	}
	if !ok {
		return c.forbidden(x)
	}
	return nil
}

// checkClusterKind answers 400 for a path of the cluster-scoped controller routes
// whose kind is no cluster-scoped controller kind.
func checkClusterKind(r *http.Request) error {
	kind := controllerKind(chi.URLParam(r, "kind"))
	switch {
	case kind == "":
		return httpapi.NewError(http.StatusBadRequest, "bad_request", "the controller kind must be CompositeController or DecoratorController, got "+strconv.Quote(chi.URLParam(r, "kind")))
	case engineapi.Namespaced(kind):
		return httpapi.NewError(http.StatusBadRequest, "bad_request", kind+" is namespaced: its paths are under /api/v1/namespaces/NAMESPACE/controllers/"+kind+"/NAME")
	}
	return nil
}

// controllerKind accepts a controller kind as the API names it, case-insensitively,
// or its resource name or short name; "" for anything else.
func controllerKind(s string) string {
	switch strings.ToLower(s) {
	case "compositecontroller", "compositecontrollers", "cc":
		return engineapi.KindComposite
	case "decoratorcontroller", "decoratorcontrollers", "dec":
		return engineapi.KindDecorator
	case "namespacedcompositecontroller", "namespacedcompositecontrollers", "ncc":
		return engineapi.KindNamespacedComposite
	case "namespaceddecoratorcontroller", "namespaceddecoratorcontrollers", "ndc":
		return engineapi.KindNamespacedDecorator
	}
	return ""
}

// controllerAccess is what a caller needs to get the controller of kind, namespace
// ("" for a cluster-scoped kind) and name.
func controllerAccess(kind, namespace, name string) access {
	switch kind {
	case engineapi.KindDecorator:
		return access{group: v1alpha1.Group, resource: "decoratorcontrollers", name: name}
	case engineapi.KindNamespacedComposite:
		return access{group: fnv1.Group, resource: fnv1.NamespacedCompositeResource, namespace: namespace, name: name}
	case engineapi.KindNamespacedDecorator:
		return access{group: fnv1.Group, resource: fnv1.NamespacedDecoratorResource, namespace: namespace, name: name}
	}
	return access{group: v1alpha1.Group, resource: "compositecontrollers", name: name}
}

// callController is the controller of a recorded call, whose name is namespace/name
// for a namespaced controller.
func callController(kind, name string) engineapi.ControllerRef {
	ref := engineapi.ControllerRef{Kind: kind, Name: name}
	if engineapi.Namespaced(kind) {
		ref.Namespace, ref.Name, _ = strings.Cut(name, "/")
	}
	return ref
}

// writeAPIJSON and writeAPIError answer in the kit's shapes; no answer of the API may
// be cached, since what it shows depends on the caller's rights.
func writeAPIJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Cache-Control", "no-store")
	httpapi.WriteJSON(w, http.StatusOK, v)
}

func writeAPIError(w http.ResponseWriter, err error) {
	w.Header().Set("Cache-Control", "no-store")
	httpapi.WriteError(w, err)
}
