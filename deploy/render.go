package deploy

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	helmchart "helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Dir is this package's directory: the chart and the kustomize bases are under it.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// Variant is one way to install: a kustomize base and the chart values that render
// the same objects.
type Variant struct {
	// Name is the kustomize base's directory under kustomize/.
	Name string
	// Namespace is the release's namespace, which the base makes explicit.
	Namespace string
	// ValuesFiles are the chart's values files (relative to the chart) on top of
	// values.yaml.
	ValuesFiles []string
	// Values override the values files' (as `helm --set` does).
	Values map[string]any
	// Chart is the chart's directory. Default ChartDir().
	Chart string
	// Release is the release's name. Default "metalambda".
	Release string
	// Cluster answers the chart's lookup calls, as the cluster does in `helm
	// upgrade`; nil renders as `helm template` does, where lookup finds nothing.
	Cluster engine.ClientProvider
	// PodSecurity is the Pod Security level the base's Namespace enforces:
	// "restricted", or "baseline" where the gateway runs as root to give each
	// worker a user of its own (gateway.workerUsers "own").
	PodSecurity string
}

// Variants are the kustomize bases and their chart values. The platform's base
// names a hook token Secret the user creates: a static base cannot make a random
// token, and one written into it would be the same for every install.
var Variants = []Variant{
	{Name: "engine", Namespace: "metacontroller", ValuesFiles: []string{"values-engine-only.yaml"}, PodSecurity: "restricted"},
	{Name: "platform", Namespace: "metalambda-system", Values: map[string]any{
		"gateway": map[string]any{"hookToken": map[string]any{"existingSecret": HookTokenSecret}},
	}, PodSecurity: "baseline"},
}

// HookTokenSecret is the Secret, in the gateway's namespace, that holds the hook token
// (key "token") under the platform's kustomize base: the name the chart gives the
// one it makes.
const HookTokenSecret = "metalambda-gateway-hook-token"

// ChartDir is the Helm chart.
func ChartDir() string { return filepath.Join(Dir(), "helm", "metalambda") }

// KustomizeDir is a variant's kustomize base.
func KustomizeDir(name string) string { return filepath.Join(Dir(), "kustomize", name) }

// RenderChart renders the chart as `helm template` would, for an install into
// v.Namespace with v's values files: every object, keyed by the template that made
// it (templates/engine.yaml...), in template order.
func RenderChart(v Variant) (map[string][]*unstructured.Unstructured, error) {
	dir := cmp.Or(v.Chart, ChartDir())
	chart, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	vals := map[string]any{}
	for _, f := range v.ValuesFiles {
		more, err := chartutil.ReadValuesFile(filepath.Join(dir, f))
		if err != nil {
			return nil, err
		}
		vals = chartutil.CoalesceTables(more.AsMap(), vals)
	}
	if v.Values != nil {
		override, err := deepCopy(v.Values)
		if err != nil {
			return nil, err
		}
		vals = chartutil.CoalesceTables(override, vals)
	}
	release := chartutil.ReleaseOptions{Name: cmp.Or(v.Release, "metalambda"), Namespace: v.Namespace, IsInstall: true}
	renderValues, err := chartutil.ToRenderValues(chart, vals, release, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	render := engine.Render
	if v.Cluster != nil {
		render = func(c *helmchart.Chart, vals chartutil.Values) (map[string]string, error) {
			return engine.RenderWithClientProvider(c, vals, v.Cluster)
		}
	}
	files, err := render(chart, renderValues)
	if err != nil {
		return nil, fmt.Errorf("render chart: %w", err)
	}
	out := map[string][]*unstructured.Unstructured{}
	for name, text := range files {
		if path.Ext(name) != ".yaml" {
			continue
		}
		objs, err := Decode([]byte(text))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if len(objs) > 0 {
			out[path.Base(name)] = objs
		}
	}
	return out, nil
}

// Decode reads a YAML stream of Kubernetes objects, skipping empty documents.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// Key names an object for comparisons: kind, namespace and name.
func Key(o *unstructured.Unstructured) string {
	return strings.Join([]string{o.GetKind(), o.GetNamespace(), o.GetName()}, "/")
}

// Sorted returns objs by Key.
func Sorted(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := slices.Clone(objs)
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int { return strings.Compare(Key(a), Key(b)) })
	return out
}

// Encode writes objects as one YAML stream.
func Encode(objs []*unstructured.Unstructured) ([]byte, error) {
	var b bytes.Buffer
	for i, o := range objs {
		if i > 0 {
			b.WriteString("---\n")
		}
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		b.Write(data)
	}
	return b.Bytes(), nil
}

// deepCopy copies values through JSON, as CoalesceTables changes its first argument.
func deepCopy(values map[string]any) (map[string]any, error) {
	data, err := json.Marshal(values)
	if err != nil {
		return nil, fmt.Errorf("chart values: %w", err)
	}
	var out map[string]any
	return out, json.Unmarshal(data, &out)
}
