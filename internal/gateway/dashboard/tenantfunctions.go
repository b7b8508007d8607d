package dashboard

import (
	"context"
	"net/http"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/httpapi"
)

// A user who may not list Functions cluster-wide (a namespace's developer) sees those
// of the namespaces it works in where it may list them. Which namespaces those are
// is not something the Kubernetes API answers for a user, so the dashboard asks in
// the namespaces it knows the user in: those of the namespaced controllers the
// engine shows it, its own namespace when it is a ServiceAccount, and a namespace it
// names (the Functions page's ?namespace=). Each is listed with the user's token, so
// the API server's RBAC (what a SubjectAccessReview of list would answer) decides,
// and a namespace where it may not list shows nothing. Nothing is asked of the
// namespaces it is not known in: no cluster-wide list of namespaces (which would need
// a grant of the gateway's own) and no review per namespace of the cluster on every
// refresh.

// serviceAccountPrefix starts the user name of a ServiceAccount's token:
// system:serviceaccount:NAMESPACE:NAME.
const serviceAccountPrefix = "system:serviceaccount:"

// visibleFunctions lists the Functions the session's user may see, sorted by
// namespace and name: every one when it may list them cluster-wide, else those of
// its namespaces (see above), known naming more of them.
func (d *Dashboard) visibleFunctions(r *http.Request, known ...string) ([]unstructured.Unstructured, error) {
	ctx, s := r.Context(), SessionFrom(r.Context())
	items, err := list(ctx, s.Dynamic, functionsResource)
	if !apierrors.IsForbidden(err) {
		return items, err
	}
	items = nil
	for _, ns := range userNamespaces(s, known) {
		l, err := s.Dynamic.Resource(functionsResource).Namespace(ns).List(ctx, metav1.ListOptions{})
		if apierrors.IsForbidden(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		slices.SortFunc(l.Items, func(a, b unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
		items = append(items, l.Items...)
	}
	return items, nil
}

// userNamespaces are the namespaces to look for a tenant's Functions in, sorted and
// without repeats: known ones that are valid names, and a ServiceAccount's own.
func userNamespaces(s *Session, known []string) []string {
	if rest, ok := strings.CutPrefix(s.User.Username, serviceAccountPrefix); ok {
		if ns, _, ok := strings.Cut(rest, ":"); ok {
			known = append(known, ns)
		}
	}
	var out []string
	for _, ns := range known {
		if ns != "" && httpapi.CheckNames(ns, "") == nil {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// controllerNamespaces are the namespaces of the namespaced controllers the engine
// shows the session's user (none without an engine, or when it does not answer).
func (d *Dashboard) controllerNamespaces(r *http.Request) []string {
	if d.engine == nil {
		return nil
	}
	l, err := d.engine.Controllers(r.Context(), SessionFrom(r.Context()).Token)
	if err != nil {
		return nil
	}
	var out []string
	for _, c := range l.Items {
		out = append(out, c.Namespace)
	}
	return out
}

// defaultNamespace is where a new function goes unless the user says otherwise:
// default where the user may create Functions there (an admin, whose token may well
// be a ServiceAccount's of a system namespace), else a ServiceAccount's own namespace.
func defaultNamespace(s *Session, mayCreateInDefault bool) string {
	if own := userNamespaces(s, nil); len(own) > 0 && !mayCreateInDefault {
		return own[0]
	}
	return "default"
}

// mayCreateFunctions asks the API server, with the user's token, whether the user
// may create Functions in namespace; an unanswered review is a no.
func mayCreateFunctions(ctx context.Context, s *Session, namespace string) bool {
	review, err := s.Kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: "create", Group: functionsResource.Group, Resource: functionsResource.Resource,
		}},
	}, metav1.CreateOptions{})
	return err == nil && review.Status.Allowed
}
