package gateway

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/gatewayapi"
	"github.com/metalambda/metalambda/internal/httpapi"
	"github.com/metalambda/metalambda/internal/jsonvalue"
)

// Each change of what a Function runs (runtime, source, handler, timeout, env and
// its sources, network) is a revision, recorded as an apps/v1 ControllerRevision as
// a StatefulSet records its own: named <function>-<hash of the content>, labelled
// with the function's name, controlled by the Function (so that it is collected
// with it), its data {"spec": the revision's part of the spec} and its revision a
// number increasing per Function. Coming back to an earlier content reuses its
// ControllerRevision with the next number. status.revisions lists the live ones,
// which the gateway serves (see rollout.Choose).

// ControllerRevisionsGVR is where revisions are recorded.
var ControllerRevisionsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "controllerrevisions"}

// FunctionLabel labels a revision with its Function's name.
const FunctionLabel = fnv1.RevisionLabel

// maxRevisionPrefix is how much of a function's name a revision's name keeps, as
// for a StatefulSet's: the hash and the dash fit in the 253 characters left.
const maxRevisionPrefix = 223

// RevisionName is the ControllerRevision of a function's revision spec.
func RevisionName(function string, spec fnv1.FunctionSpec) string {
	prefix := function
	if len(prefix) > maxRevisionPrefix {
		prefix = strings.TrimRight(prefix[:maxRevisionPrefix], ".-")
	}
	return prefix + "-" + revisionHash(spec)
}

// revisionHash is a short hash of what a revision runs.
func revisionHash(spec fnv1.FunctionSpec) string {
	data, _ := json.Marshal(spec.RevisionSpec())
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:10]
}

// revisionData is a revision's content as its ControllerRevision holds it.
type revisionData = fnv1.RevisionData

// RevisionSpec decodes what a ControllerRevision of a Function runs.
func RevisionSpec(cr *unstructured.Unstructured) (fnv1.FunctionSpec, error) {
	var data revisionData
	raw, ok := cr.Object["data"]
	if !ok {
		return fnv1.FunctionSpec{}, fmt.Errorf("ControllerRevision %s has no data", cr.GetName())
	}
	if err := jsonvalue.Convert(raw, &data); err != nil {
		return fnv1.FunctionSpec{}, fmt.Errorf("ControllerRevision %s: decode its data: %w", cr.GetName(), err)
	}
	return data.Spec, nil
}

// errRevisionConflict is a ControllerRevision of the name a revision needs that
// another object controls or that holds other content.
var errRevisionConflict = errors.New("revision conflict")

// recordRevision makes sure the spec's revision is recorded, as the latest, and
// returns its name and the live revisions to serve, oldest first. A Function without
// a rollout policy serves its latest revision alone; one with a policy keeps its
// live revisions, the new one listed at a share of 0 for the rollout driver.
func (s *store) recordRevision(ctx context.Context, u *unstructured.Unstructured, f *fnv1.Function) (string, []fnv1.RevisionShare, error) {
	name := RevisionName(u.GetName(), f.Spec)
	if i := slices.IndexFunc(f.Status.Revisions, func(r fnv1.RevisionShare) bool { return r.Name == name }); i >= 0 && f.Status.CurrentRevision == name {
		if f.Spec.Rollout == nil {
			return name, []fnv1.RevisionShare{{Name: name, Revision: f.Status.Revisions[i].Revision, Share: 100}}, nil
		}
		return name, f.Status.Revisions, nil // the rollout driver's
	}
	owned, err := s.ownedRevisions(ctx, u)
	if err != nil {
		return "", nil, err
	}
	number, err := s.makeLatest(ctx, u, f, name, owned)
	if err != nil {
		return "", nil, err
	}
	live := liveRevisions(f, name, number)
	s.prune(ctx, u, owned, name, live, f.Spec.HistoryLimit())
	return name, live, nil
}

// liveRevisions are the revisions to serve once name (number) is the latest.
func liveRevisions(f *fnv1.Function, name string, number int64) []fnv1.RevisionShare {
	latest := fnv1.RevisionShare{Name: name, Revision: number, Share: 100}
	if f.Spec.Rollout == nil {
		return []fnv1.RevisionShare{latest}
	}
	latest.Share = 0
	var live []fnv1.RevisionShare
	for _, r := range f.Status.Revisions {
		switch {
		case r.Name == name:
			latest.Share = r.Share // back to a live revision: it keeps its share
		case r.Share > 0:
			live = append(live, r)
		}
	}
	if len(live) == 0 || latest.Share == 100 {
		latest.Share = 100 // nothing to roll out from
		return []fnv1.RevisionShare{latest}
	}
	return append(live, latest)
}

// ownedRevisions lists the ControllerRevisions the Function controls.
func (s *store) ownedRevisions(ctx context.Context, u *unstructured.Unstructured) ([]appsv1.ControllerRevision, error) {
	list, err := s.dyn.Resource(ControllerRevisionsGVR).Namespace(u.GetNamespace()).List(ctx, metav1.ListOptions{LabelSelector: FunctionLabel + "=" + u.GetName()})
	if err != nil {
		return nil, fmt.Errorf("list the revisions of Function %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	var owned []appsv1.ControllerRevision
	for _, item := range list.Items {
		var cr appsv1.ControllerRevision
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &cr); err != nil {
			continue
		}
		if metav1.IsControlledBy(&cr, u) {
			owned = append(owned, cr)
		}
	}
	return owned, nil
}

// makeLatest creates the revision name, or gives it the next number when it is an
// earlier one (a rollback), and returns its number.
func (s *store) makeLatest(ctx context.Context, u *unstructured.Unstructured, f *fnv1.Function, name string, owned []appsv1.ControllerRevision) (int64, error) {
	var latest int64
	for _, cr := range owned {
		latest = max(latest, cr.Revision)
	}
	client := s.dyn.Resource(ControllerRevisionsGVR).Namespace(u.GetNamespace())
	i := slices.IndexFunc(owned, func(cr appsv1.ControllerRevision) bool { return cr.Name == name })
	if i < 0 {
		obj, err := newRevision(u, f, name, latest+1)
		if err != nil {
			return 0, err
		}
		_, err = client.Create(ctx, obj, metav1.CreateOptions{FieldManager: fieldManager})
		if apierrors.IsAlreadyExists(err) {
			return s.recordedBy(ctx, u, f, name) // another replica of the gateway, or another owner
		}
		if err != nil {
			return 0, fmt.Errorf("record revision %s: %w", name, err)
		}
		return latest + 1, nil
	}
	cr := owned[i]
	if spec, err := crSpec(&cr); err != nil || !jsonvalue.Equal(spec, f.Spec.RevisionSpec()) {
		return 0, fmt.Errorf("%w: ControllerRevision %s holds other content than the spec of Function %s", errRevisionConflict, name, u.GetName())
	}
	if cr.Revision == latest {
		return latest, nil
	}
	cr.Revision = latest + 1
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cr)
	if err != nil {
		return 0, err
	}
	if _, err := client.Update(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
		return 0, fmt.Errorf("make revision %s the latest: %w", name, err)
	}
	return latest + 1, nil
}

// recordedBy is the number of the revision name that exists already: recorded by
// another replica of the gateway since the list, when the Function controls it and
// it holds the spec; else an errRevisionConflict naming it.
func (s *store) recordedBy(ctx context.Context, u *unstructured.Unstructured, f *fnv1.Function, name string) (int64, error) {
	obj, err := s.dyn.Resource(ControllerRevisionsGVR).Namespace(u.GetNamespace()).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("read revision %s: %w", name, err)
	}
	var cr appsv1.ControllerRevision
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &cr); err != nil || !metav1.IsControlledBy(&cr, u) {
		return 0, fmt.Errorf("%w: a ControllerRevision %s that Function %s does not control exists; delete it", errRevisionConflict, name, u.GetName())
	}
	if spec, err := crSpec(&cr); err != nil || !jsonvalue.Equal(spec, f.Spec.RevisionSpec()) {
		return 0, fmt.Errorf("%w: ControllerRevision %s holds other content than the spec of Function %s", errRevisionConflict, name, u.GetName())
	}
	return cr.Revision, nil
}

func crSpec(cr *appsv1.ControllerRevision) (fnv1.FunctionSpec, error) {
	var data revisionData
	err := json.Unmarshal(cr.Data.Raw, &data)
	return data.Spec, err
}

// newRevision builds the ControllerRevision of f's spec.
func newRevision(u *unstructured.Unstructured, f *fnv1.Function, name string, number int64) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(revisionData{Spec: f.Spec.RevisionSpec()})
	if err != nil {
		return nil, err
	}
	controller := true
	cr := &appsv1.ControllerRevision{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ControllerRevision"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: u.GetNamespace(),
			Labels: map[string]string{FunctionLabel: u.GetName()},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: fnv1.Group + "/" + fnv1.Version, Kind: fnv1.Kind, Name: u.GetName(), UID: u.GetUID(),
				Controller: &controller, BlockOwnerDeletion: &controller,
			}},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: number,
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cr)
	if err != nil {
		return nil, err
	}
	unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
	return &unstructured.Unstructured{Object: obj}, nil
}

// prune deletes the oldest revisions past limit, never the latest nor a live one.
// A failure is left for the next new revision.
func (s *store) prune(ctx context.Context, u *unstructured.Unstructured, owned []appsv1.ControllerRevision, latest string, live []fnv1.RevisionShare, limit int) {
	var old []appsv1.ControllerRevision
	for _, cr := range owned {
		if cr.Name != latest && !slices.ContainsFunc(live, func(r fnv1.RevisionShare) bool { return r.Name == cr.Name }) {
			old = append(old, cr)
		}
	}
	if len(old) <= limit {
		return
	}
	slices.SortFunc(old, func(a, b appsv1.ControllerRevision) int { return cmp.Compare(b.Revision, a.Revision) })
	client := s.dyn.Resource(ControllerRevisionsGVR).Namespace(u.GetNamespace())
	for _, cr := range old[limit:] {
		uid := cr.UID
		err := client.Delete(ctx, cr.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return
		}
	}
}

// revisionSpec reads what the live revision name of the Function key runs, from
// its ControllerRevision: only one the Function controls, and whose content is
// what its name was made from. Whoever may write ControllerRevisions in the
// namespace, but not the Function, can then neither swap the code a live
// revision runs nor slip one in under a name status lists.
func (s *store) revisionSpec(ctx context.Context, key, name string) (fnv1.FunctionSpec, error) {
	namespace, function, _ := cache.SplitMetaNamespaceKey(key)
	obj, err := s.dyn.Resource(ControllerRevisionsGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fnv1.FunctionSpec{}, fmt.Errorf("read live revision %s: %w", name, err)
	}
	owner, exists, _ := s.informer.GetIndexer().GetByKey(key)
	var cr appsv1.ControllerRevision
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &cr); err != nil || !exists || !metav1.IsControlledBy(&cr, owner.(*unstructured.Unstructured)) {
		return fnv1.FunctionSpec{}, fmt.Errorf("%w: live revision %s is not a ControllerRevision that Function %s controls; it is not served", errRevisionConflict, name, key)
	}
	spec, err := RevisionSpec(obj)
	if err != nil {
		return fnv1.FunctionSpec{}, err
	}
	if RevisionName(function, spec) != name {
		return fnv1.FunctionSpec{}, fmt.Errorf("%w: ControllerRevision %s holds other content than the revision its name was made from (it was changed after the gateway recorded it); it is not served", errRevisionConflict, name)
	}
	return spec, nil
}

// listRevisions serves GET .../revisions: the function's ControllerRevisions,
// newest first, with the live ones' shares. They are read as the caller, who needs
// to be allowed to list controllerrevisions (apps) in the namespace, as kubectl
// would.
func (g *Gateway) listRevisions(w http.ResponseWriter, r *http.Request) {
	ns, name := chi.URLParam(r, "namespace"), chi.URLParam(r, "name")
	fn, err := g.functions(ns).Get(r.Context(), name, metav1.GetOptions{})
	if err != nil {
		httpapi.WriteError(w, fromAPI(err))
		return
	}
	list, err := g.dyn.Resource(ControllerRevisionsGVR).Namespace(ns).List(r.Context(), metav1.ListOptions{LabelSelector: FunctionLabel + "=" + name})
	if err != nil {
		httpapi.WriteError(w, fromAPI(err))
		return
	}
	var status fnv1.FunctionStatus
	_ = jsonvalue.Convert(fn.Object["status"], &status)
	items := make([]gatewayapi.Revision, 0, len(list.Items))
	for i := range list.Items {
		if rev, ok := toRevision(fn, &list.Items[i], &status); ok {
			items = append(items, rev)
		}
	}
	slices.SortFunc(items, func(a, b gatewayapi.Revision) int { return cmp.Compare(b.Revision, a.Revision) })
	httpapi.WriteJSON(w, http.StatusOK, gatewayapi.RevisionList{Items: items})
}

// toRevision is a ControllerRevision of fn as the API answers it; false for one fn
// does not control, or whose content is not what its name was made from (as
// revisionSpec, since a rollback takes its content): an owner reference is
// anyone's to write who may create ControllerRevisions.
func toRevision(fn, obj *unstructured.Unstructured, status *fnv1.FunctionStatus) (gatewayapi.Revision, bool) {
	var cr appsv1.ControllerRevision
	if runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &cr) != nil || !metav1.IsControlledBy(&cr, fn) {
		return gatewayapi.Revision{}, false
	}
	spec, err := crSpec(&cr)
	if err != nil || RevisionName(fn.GetName(), spec) != cr.Name {
		return gatewayapi.Revision{}, false
	}
	rev := gatewayapi.Revision{Name: cr.Name, Revision: cr.Revision, Created: cr.CreationTimestamp.Time, Current: cr.Name == status.CurrentRevision, Spec: spec}
	if i := slices.IndexFunc(status.Revisions, func(r fnv1.RevisionShare) bool { return r.Name == cr.Name }); i >= 0 {
		rev.Share = &status.Revisions[i].Share
	}
	return rev, true
}
