package crds

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsclientv1 "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var files embed.FS

// DefaultTimeout bounds Install when its context has no deadline.
const DefaultTimeout = time.Minute

// FieldManager is the field manager Install writes with.
const FieldManager = "metalambda-crds"

// pollInterval is how often Install checks whether the CRDs are established.
const pollInterval = 100 * time.Millisecond

// All decodes every embedded CRD, in file-name order. A file that cannot be decoded,
// holds something other than an apiextensions.k8s.io/v1 CustomResourceDefinition, or
// repeats a CRD name is an error naming the file.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) { return load(files) }

// load decodes every *.yaml file at the top of fsys.
func load(fsys fs.FS) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("crds: list embedded files: %w", err)
	}
	var all []*apiextensionsv1.CustomResourceDefinition
	seen := map[string]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		data, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("crds: read %s: %w", e.Name(), err)
		}
		crds, err := decode(data)
		if err != nil {
			return nil, fmt.Errorf("crds: decode %s: %w", e.Name(), err)
		}
		if len(crds) == 0 {
			return nil, fmt.Errorf("crds: %s holds no CustomResourceDefinition", e.Name())
		}
		for _, crd := range crds {
			if other, dup := seen[crd.Name]; dup {
				return nil, fmt.Errorf("crds: %s defines %s, already defined in %s", e.Name(), crd.Name, other)
			}
			seen[crd.Name] = e.Name()
		}
		all = append(all, crds...)
	}
	return all, nil
}

// decode reads every YAML document of data as a CRD, rejecting unknown fields so that a
// misspelt key in a hand-written file is an error rather than silently dropped.
func decode(data []byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var crds []*apiextensionsv1.CustomResourceDefinition
	for i := 1; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return crds, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		asJSON, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if t := bytes.TrimSpace(asJSON); len(t) == 0 || bytes.Equal(t, []byte("null")) {
			continue // empty or only comments
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(doc, crd); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if gvk := crd.GroupVersionKind(); gvk != apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition") {
			return nil, fmt.Errorf("document %d: is %s %s, want apiextensions.k8s.io/v1 CustomResourceDefinition", i, crd.APIVersion, crd.Kind)
		}
		if crd.Name == "" {
			return nil, fmt.Errorf("document %d: the CustomResourceDefinition has no metadata.name", i)
		}
		crds = append(crds, crd)
	}
}

// Install creates each CRD, or updates it if it exists, then waits until every one is
// Established with its names accepted.
//
// An update replaces the spec, adds the CRD's labels and annotations to those already
// there, and keeps everything else of the stored object (resourceVersion, finalizers,
// owner references). The wait ends with the context: when ctx has no deadline,
// DefaultTimeout applies. The error then names each CRD that is not ready and its
// conditions. Install does not modify its arguments.
func Install(ctx context.Context, client apiextensionsclient.Interface, crds ...*apiextensionsv1.CustomResourceDefinition) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	api := client.ApiextensionsV1().CustomResourceDefinitions()
	names := make([]string, 0, len(crds))
	for _, crd := range crds {
		if crd == nil {
			return errors.New("crds: Install got a nil CustomResourceDefinition")
		}
		if err := createOrUpdate(ctx, api, crd); err != nil {
			return err
		}
		names = append(names, crd.Name)
	}
	return waitReady(ctx, api, names)
}

func createOrUpdate(ctx context.Context, api apiextensionsclientv1.CustomResourceDefinitionInterface, want *apiextensionsv1.CustomResourceDefinition) error {
	create := want.DeepCopy()
	create.ResourceVersion = ""
	_, err := api.Create(ctx, create, metav1.CreateOptions{FieldManager: FieldManager})
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("crds: create CustomResourceDefinition %s: %w", want.Name, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		have, err := api.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		update := have.DeepCopy() // keeps resourceVersion, finalizers, owners...
		update.Spec = *want.Spec.DeepCopy()
		update.Labels = union(have.Labels, want.Labels)
		update.Annotations = union(have.Annotations, want.Annotations)
		_, err = api.Update(ctx, update, metav1.UpdateOptions{FieldManager: FieldManager})
		return err
	})
	if err != nil {
		return fmt.Errorf("crds: update CustomResourceDefinition %s: %w", want.Name, err)
	}
	return nil
}

// union returns base with extra's entries added (extra wins), or nil if both are empty.
func union(base, extra map[string]string) map[string]string {
	if len(base) == 0 && len(extra) == 0 {
		return nil
	}
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, extra)
	return out
}

// waitReady polls until every named CRD is Established with NamesAccepted, or ctx ends.
func waitReady(ctx context.Context, api apiextensionsclientv1.CustomResourceDefinitionInterface, names []string) error {
	pending := slices.Clone(names)
	why := map[string]string{}
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		var still []string
		for _, name := range pending {
			crd, err := api.Get(ctx, name, metav1.GetOptions{})
			switch {
			case err != nil:
				why[name] = "cannot read it: " + err.Error()
			case ready(crd):
				continue
			default:
				why[name] = describeConditions(crd)
			}
			still = append(still, name)
		}
		pending = still
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			errs := make([]error, 0, len(pending))
			for _, name := range pending {
				errs = append(errs, fmt.Errorf("crds: CustomResourceDefinition %s is not Established with NamesAccepted (%w); %s", name, ctx.Err(), why[name]))
			}
			return errors.Join(errs...)
		case <-tick.C:
		}
	}
}

func ready(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return crd.DeletionTimestamp == nil &&
		conditionTrue(crd, apiextensionsv1.Established) &&
		conditionTrue(crd, apiextensionsv1.NamesAccepted)
}

func conditionTrue(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == t {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// describeConditions renders the CRD's conditions as "Type=Status (Reason: message)".
func describeConditions(crd *apiextensionsv1.CustomResourceDefinition) string {
	var b strings.Builder
	if crd.DeletionTimestamp != nil {
		b.WriteString("it is being deleted; ")
	}
	if len(crd.Status.Conditions) == 0 {
		b.WriteString("conditions: none yet")
		return b.String()
	}
	b.WriteString("conditions: ")
	for i, c := range crd.Status.Conditions {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%s", c.Type, c.Status)
		if c.Reason != "" || c.Message != "" {
			fmt.Fprintf(&b, " (%s: %s)", c.Reason, c.Message)
		}
	}
	return b.String()
}
