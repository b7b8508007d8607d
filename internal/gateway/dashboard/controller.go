package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/go-chi/chi/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/metalambda/metalambda/internal/engineapi"
)

// maxParentDetails bounds how many parents of one controller the controller page asks
// the engine about (last sync, last error) on each refresh.
const maxParentDetails = 50

// ControllerPage is what a controller's page shows.
type ControllerPage struct {
	Kind, Name       string
	Ready, Supported Condition
	ParentResources  []engineapi.Resource
	ChildResources   []engineapi.Resource
	Parents          []ParentRow
	// More is how many parents have no last sync shown (past maxParentDetails).
	More int
	// Calls are the controller's recent hook calls.
	Calls HookCallsView
	// EngineError says why the engine's part is missing, if it is.
	EngineError string
}

// ParentRow is one parent in the controller's table.
type ParentRow struct {
	Resource, Kind  string
	Namespace, Name string
	Ready           Condition
	Conditions      []Condition
	Created         time.Time
	LastSync        *time.Time
	LastError       string
	Detail          bool
}

func (d *Dashboard) controller() view {
	return view{page: "controller.html", title: "Controller", nav: "overview", load: d.loadController}
}

func (d *Dashboard) loadController(r *http.Request) (any, error) {
	ctx, s := r.Context(), SessionFrom(r.Context())
	kind, name := chi.URLParam(r, "kind"), chi.URLParam(r, "name")
	c, err := getController(ctx, s, kind, name)
	if err != nil {
		return nil, err
	}
	conds := conditions(c)
	page := ControllerPage{Kind: kind, Name: name, Ready: condition(conds, "Ready"), Supported: condition(conds, "Supported")}
	page.ParentResources, page.ChildResources = specResources(c)
	for _, res := range page.ParentResources {
		items, err := list(ctx, s.Dynamic, resourceOf(res))
		if err != nil {
			return nil, fmt.Errorf("parents (%s %s): %w", res.APIVersion, res.Resource, err)
		}
		for i := range items {
			page.Parents = append(page.Parents, parentRow(res.Resource, &items[i]))
		}
	}
	page.EngineError = d.addParentDetails(ctx, s.Token, kind, name, &page)
	if !isEventStream(r) { // the calls stream on their own (see hookCallsPage)
		page.Calls = d.hookCalls(ctx, s.Token, engineapi.HookCallQuery{Controller: kind + "/" + name, Limit: 20})
	}
	return page, nil
}

// specResources reads the parent and child resources of a controller's spec:
// spec.parentResource of a CompositeController, spec.resources of a
// DecoratorController; spec.childResources, spec.attachments.
func specResources(c *unstructured.Unstructured) (parents, children []engineapi.Resource) {
	res := func(m map[string]any) engineapi.Resource {
		av, _ := m["apiVersion"].(string)
		r, _ := m["resource"].(string)
		return engineapi.Resource{APIVersion: av, Resource: r}
	}
	if m, ok, _ := unstructured.NestedMap(c.Object, "spec", "parentResource"); ok {
		parents = append(parents, res(m))
	}
	for _, path := range [][]string{{"spec", "resources"}, {"spec", "childResources"}, {"spec", "attachments"}} {
		items, _, _ := unstructured.NestedSlice(c.Object, path...)
		for _, it := range items {
			m, ok := it.(map[string]any)
			if !ok {
				continue
			}
			if path[1] == "resources" {
				parents = append(parents, res(m))
			} else {
				children = append(children, res(m))
			}
		}
	}
	return parents, children
}

func parentRow(resource string, u *unstructured.Unstructured) ParentRow {
	conds := conditions(u)
	return ParentRow{Resource: resource, Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Conditions: conds, Ready: condition(conds, "Ready"), Created: u.GetCreationTimestamp().Time}
}

// addParentDetails asks the engine for each parent's last sync and error.
func (d *Dashboard) addParentDetails(ctx context.Context, token, kind, name string, page *ControllerPage) string {
	if d.engine == nil {
		return noEngine
	}
	for i := range page.Parents {
		if i >= maxParentDetails {
			page.More = len(page.Parents) - maxParentDetails
			break
		}
		p := &page.Parents[i]
		pd, err := d.engine.Parent(ctx, token, kind, name, p.Namespace, p.Name)
		if err != nil {
			continue // the engine may not have seen a new parent yet
		}
		p.Detail, p.LastSync, p.LastError = true, pd.LastSyncTime, pd.LastError
	}
	return ""
}

const noEngine = "The gateway has no engine API address (--engine-url): parent counts, last syncs, children and hook calls are not shown."

// ParentPage is what one parent's page shows. Namespace is the controller's, set for
// a namespaced controller.
type ParentPage struct {
	Kind, Namespace, Name string
	Parent                ParentRow
	Status                string
	Detail                *engineapi.ParentDetail
	// Tree is the children grouped by kind.
	Tree   []ChildGroup
	Events []corev1.Event
	// EventsError says why the events are not shown (a user who may not list them).
	EventsError string
	Calls       HookCallsView
	EngineError string
}

// ControllerURL is the page of the parent's controller.
func (p ParentPage) ControllerURL() string {
	return controllerPath(engineapi.ControllerRef{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name})
}

// ChildGroup is the children of one kind.
type ChildGroup struct {
	APIVersion, Kind string
	Children         []engineapi.Child
}

func (d *Dashboard) parent() view {
	return view{page: "parent.html", title: "Parent", nav: "overview", load: d.loadParent}
}

func (d *Dashboard) loadParent(r *http.Request) (any, error) {
	ctx, s := r.Context(), SessionFrom(r.Context())
	kind, name := chi.URLParam(r, "kind"), chi.URLParam(r, "name")
	ns, pname, resource := chi.URLParam(r, "namespace"), chi.URLParam(r, "parent"), r.URL.Query().Get("resource")
	if ns == "-" {
		ns = ""
	}
	c, err := getController(ctx, s, kind, name)
	if err != nil {
		return nil, err
	}
	parents, _ := specResources(c)
	obj, res, err := findParent(ctx, s, parents, resource, ns, pname)
	if err != nil {
		return nil, err
	}
	page := ParentPage{Kind: kind, Name: name, Parent: parentRow(res.Resource, obj), Status: statusJSON(obj)}
	if err := page.addEvents(ctx, s, obj); err != nil {
		return nil, err
	}
	if d.engine == nil {
		page.EngineError = noEngine
		return page, nil
	}
	if page.Detail, err = d.engine.Parent(ctx, s.Token, kind, name, ns, pname); err != nil {
		page.EngineError = err.Error()
	} else {
		page.Tree = childTree(page.Detail.Children)
		page.Parent.LastSync, page.Parent.LastError = page.Detail.LastSyncTime, page.Detail.LastError
	}
	if !isEventStream(r) {
		page.Calls = d.hookCalls(ctx, s.Token, engineapi.HookCallQuery{Controller: kind + "/" + name, Namespace: ns, Parent: pname, Limit: 20})
	}
	return page, nil
}

// findParent gets the parent among the controller's parent resources (the one named
// by resource, when given).
func findParent(ctx context.Context, s *Session, parents []engineapi.Resource, resource, ns, name string) (*unstructured.Unstructured, engineapi.Resource, error) {
	lastErr := notFound("the controller has no parent %s/%s", ns, name)
	for _, res := range parents {
		if resource != "" && res.Resource != resource {
			continue
		}
		obj, err := s.Dynamic.Resource(resourceOf(res)).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return obj, res, nil
		}
		lastErr = err
	}
	return nil, engineapi.Resource{}, lastErr
}

// addEvents adds the events about obj; a user who may not list events there is told
// so in place of them.
func (p *ParentPage) addEvents(ctx context.Context, s *Session, obj *unstructured.Unstructured) error {
	ev, err := eventsOf(ctx, s, obj)
	if apierrors.IsForbidden(err) {
		p.EventsError = "The events are not shown: you may not list events"
		if ns := obj.GetNamespace(); ns != "" {
			p.EventsError += " in namespace " + ns
		}
		p.EventsError += "."
		return nil
	}
	p.Events = ev
	return err
}

// eventsOf lists the events about obj, newest first.
func eventsOf(ctx context.Context, s *Session, obj *unstructured.Unstructured) ([]corev1.Event, error) {
	sel := fields.OneTermEqualSelector("involvedObject.uid", string(obj.GetUID())).String()
	l, err := s.Kube.CoreV1().Events(obj.GetNamespace()).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, err
	}
	ev := l.Items
	last := func(e corev1.Event) time.Time {
		if !e.LastTimestamp.IsZero() {
			return e.LastTimestamp.Time
		}
		return e.EventTime.Time
	}
	slices.SortStableFunc(ev, func(a, b corev1.Event) int { return last(b).Compare(last(a)) })
	if len(ev) > 30 {
		ev = ev[:30]
	}
	return ev, nil
}

// childTree groups children by apiVersion and kind, keeping the engine's order.
func childTree(children []engineapi.Child) []ChildGroup {
	var groups []ChildGroup
	for _, c := range children {
		if n := len(groups); n > 0 && groups[n-1].APIVersion == c.APIVersion && groups[n-1].Kind == c.Kind {
			groups[n-1].Children = append(groups[n-1].Children, c)
			continue
		}
		groups = append(groups, ChildGroup{APIVersion: c.APIVersion, Kind: c.Kind, Children: []engineapi.Child{c}})
	}
	return groups
}

// statusJSON is the object's status as indented JSON, or "" without one.
func statusJSON(u *unstructured.Unstructured) string {
	st, ok := u.Object["status"]
	if !ok {
		return ""
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return ""
	}
	return string(b)
}

// getController reads the controller object kind/name as the session's user.
func getController(ctx context.Context, s *Session, kind, name string) (*unstructured.Unstructured, error) {
	gvr, ok := controllerResource(kind)
	if !ok {
		return nil, notFound("no controller kind %q: CompositeController or DecoratorController", kind)
	}
	return s.Dynamic.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
}
