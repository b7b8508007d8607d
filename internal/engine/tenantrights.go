package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine/discovery"
)

// right is one verb on one resource (or subresource) of a namespace.
type right struct {
	verb, group, resource, subresource string
}

func (r right) resourceName() string {
	if r.subresource == "" {
		return r.resource
	}
	return r.resource + "/" + r.subresource
}

// neededRights lists every right a namespaced controller uses on its parents,
// children and revisions, in a stable order.
func neededRights(c *controller, strategy ApplyStrategy) []right {
	var out []right
	add := func(res *discovery.Resource, sub string, verbs ...string) {
		for _, v := range verbs {
			r := right{verb: v, group: res.Group, resource: res.Resource, subresource: sub}
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	_, decorates := c.flavor.(*decorator)
	for _, p := range c.parents {
		add(p.res, "", "get", "list", "watch")
		if c.hooks.finalize != nil || decorates {
			add(p.res, "", "patch") // finalizers; a decorator's labels and annotations
		}
		switch {
		case p.res.HasStatus:
			add(p.res, "status", "update")
		case decorates:
			add(p.res, "", "update") // a decorator writes the status of a resource without its subresource
		}
	}
	for _, ct := range c.children {
		add(ct.res, "", "get", "list", "watch", "create", "patch", "delete")
		if strategy == ThreeWay {
			add(ct.res, "", "update")
		}
	}
	if c.rollout != nil {
		add(c.rollout.revisions.res, "", "get", "list", "watch", "create", "update", "delete")
	}
	return out
}

// checkRights asks the API server, with one SubjectAccessReview per right, whether t
// holds each of rights in its namespace. Any it lacks is a MissingRights error whose
// message is the grant that would give them.
func checkRights(ctx context.Context, kube kubernetes.Interface, t tenant, rights []right) error {
	var missing []right
	for _, r := range rights {
		ok, err := allowed(ctx, kube, t, r)
		if err != nil {
			return buildErr("RightsUnknown", "cannot ask the API server what %s may do: %v", describeTenant(t), err)
		}
		if !ok {
			missing = append(missing, r)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return buildErr(ReasonMissingRights, "%s", missingRightsMessage(t, missing))
}

// ReasonMissingRights is the reason of the Ready condition, and of the event, of a
// namespaced controller whose ServiceAccount lacks a right it needs.
const ReasonMissingRights = "MissingRights"

func allowed(ctx context.Context, kube kubernetes.Interface, t tenant, r right) (bool, error) {
	review, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: t.user(), Groups: t.groups(),
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: t.namespace, Verb: r.verb, Group: r.group, Resource: r.resource, Subresource: r.subresource,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return review.Status.Allowed, nil
}

// missingRightsMessage names, per resource, the verbs t may not use and the grant
// that gives them: "ServiceAccount team-a/ctl may not create configmaps in team-a:
// grant create on configmaps ("") in namespace team-a".
func missingRightsMessage(t tenant, missing []right) string {
	type key struct{ group, resource string }
	var order []key
	verbs := map[key][]string{}
	for _, r := range missing {
		k := key{r.group, r.resourceName()}
		if _, seen := verbs[k]; !seen {
			order = append(order, k)
		}
		verbs[k] = append(verbs[k], r.verb)
	}
	parts := make([]string, 0, len(order))
	for _, k := range order {
		v := strings.Join(verbs[k], ", ")
		parts = append(parts, fmt.Sprintf("%s may not %s %s in %s: grant %s on %s (%q) in namespace %s", describeTenant(t), v, k.resource, t.namespace, v, k.resource, k.group, t.namespace))
	}
	return strings.Join(parts, "; ")
}

// tenantRelated refuses related resources outside a namespaced controller's
// namespace: cluster-scoped ones, other namespaces, namespace selectors.
func tenantRelated(env *environment, rule v1alpha1.RelatedResourceRule, res *discovery.Resource) error {
	t := env.tenant
	switch {
	case !res.Namespaced:
		return fmt.Errorf("%s is cluster-scoped: a namespaced controller relates only objects of its namespace %s", res.Resource, t.namespace)
	case rule.NamespaceSelector != nil:
		return fmt.Errorf("namespaceSelector: a namespaced controller relates only objects of its namespace %s", t.namespace)
	case rule.Namespace != "" && rule.Namespace != t.namespace:
		return fmt.Errorf("namespace %q: a namespaced controller relates only objects of its namespace %s", rule.Namespace, t.namespace)
	}
	ctx, cancel := context.WithTimeout(context.Background(), relatedRightsTimeout)
	defer cancel()
	return checkRights(ctx, env.reviews, *t, []right{
		{verb: "get", group: res.Group, resource: res.Resource},
		{verb: "list", group: res.Group, resource: res.Resource},
		{verb: "watch", group: res.Group, resource: res.Resource},
	})
}

// relatedRightsTimeout bounds the reviews of a related resource's rights.
const relatedRightsTimeout = 10 * time.Second
