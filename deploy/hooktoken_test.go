package deploy

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// fakeCluster answers the chart's lookup calls from a fake dynamic client.
type fakeCluster struct {
	dyn *dynamicfake.FakeDynamicClient
}

func (c fakeCluster) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, false, err
	}
	return c.dyn.Resource(gv.WithResource(strings.ToLower(kind) + "s")), true, nil
}

// hookTokenWiring is what a render says about the hook token: the Secret the chart
// makes (its token, "" for none), and per Deployment its hook token flags and the
// Secret it mounts.
type hookTokenWiring struct {
	token  string
	args   map[string][]string
	mounts map[string]string
}

func wiringOf(t *testing.T, rendered map[string][]*unstructured.Unstructured) hookTokenWiring {
	t.Helper()
	w := hookTokenWiring{args: map[string][]string{}, mounts: map[string]string{}}
	for _, objs := range rendered {
		for _, o := range objs {
			switch o.GetKind() {
			case "Secret":
				data, _, _ := unstructured.NestedString(o.Object, "data", "token")
				raw, err := base64.StdEncoding.DecodeString(data)
				if err != nil {
					t.Fatalf("%s: %v", Key(o), err)
				}
				w.token = string(raw)
			case "Deployment":
				containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
				args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
				for _, a := range args {
					if strings.HasPrefix(a, "--hook-token") {
						w.args[o.GetName()] = append(w.args[o.GetName()], a)
					}
				}
				volumes, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
				for _, v := range volumes {
					if name, _, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName"); name != "" {
						w.mounts[o.GetName()] = name
					}
				}
			}
		}
	}
	return w
}

// TestChartHookToken: the platform's engine and gateway share one hook token: a
// Secret the chart makes with a random token, kept across upgrades (lookup finds
// it), or the user's own Secret; the engine presents it to the gateway's Service
// alone. The engine alone has none.
func TestChartHookToken(t *testing.T) {
	platform := Variant{Name: "platform", Namespace: "metalambda-system"}
	wantArgs := map[string][]string{
		"metalambda-engine":  {"--hook-token-file=/var/run/metalambda/hook-token/token", "--hook-token-host=metalambda-gateway.metalambda-system"},
		"metalambda-gateway": {"--hook-token-file=/var/run/metalambda/hook-token/token"},
	}
	render := func(v Variant) hookTokenWiring {
		t.Helper()
		rendered, err := RenderChart(v)
		if err != nil {
			t.Fatal(err)
		}
		return wiringOf(t, rendered)
	}
	checkWired := func(what string, w hookTokenWiring, secret string) {
		t.Helper()
		for name, want := range wantArgs {
			if !slices.Equal(w.args[name], want) {
				t.Errorf("%s: %s's args %v, want %v", what, name, w.args[name], want)
			}
			if w.mounts[name] != secret {
				t.Errorf("%s: %s mounts Secret %q, want %q", what, name, w.mounts[name], secret)
			}
		}
	}

	first, second := render(platform), render(platform)
	checkWired("install", first, HookTokenSecret)
	if len(first.token) != 64 || first.token == second.token {
		t.Errorf("installs made tokens %q and %q, want 64 random characters each", first.token, second.token)
	}

	existing := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: HookTokenSecret, Namespace: platform.Namespace},
		Data:       map[string][]byte{"token": []byte("kept-from-the-install")},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(existing)
	if err != nil {
		t.Fatal(err)
	}
	upgrade := platform
	upgrade.Cluster = fakeCluster{dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), &unstructured.Unstructured{Object: obj})}
	if got := render(upgrade); got.token != "kept-from-the-install" {
		t.Errorf("upgrade: token %q, want the installed one kept", got.token)
	}

	own := platform
	own.Values = map[string]any{"gateway": map[string]any{"hookToken": map[string]any{"existingSecret": "mine"}}}
	w := render(own)
	checkWired("existingSecret", w, "mine")
	if w.token != "" {
		t.Errorf("existingSecret: the chart made a Secret too")
	}

	engineOnly := render(Variants[0])
	if len(engineOnly.args) != 0 || len(engineOnly.mounts) != 0 || engineOnly.token != "" {
		t.Errorf("engine alone: %+v, want no hook token", engineOnly)
	}
}

// TestKustomizeHookTokenOverlay: the overlay deploy/README.md shows, a
// secretGenerator of the hook token Secret on top of the platform base, gives both
// Deployments the generated Secret (kustomize renames the references to its hashed
// name, so a new token rolls them).
func TestKustomizeHookTokenOverlay(t *testing.T) {
	dir := t.TempDir()
	base, err := filepath.Rel(dir, KustomizeDir("platform"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"token": "0123456789abcdef",
		"kustomization.yaml": "resources:\n- " + base + "\n" +
			"secretGenerator:\n- name: " + HookTokenSecret + "\n  namespace: metalambda-system\n  files: [token]\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	objs := kustomizeBuild(t, dir)
	var generated string
	for _, o := range objs {
		if o.GetKind() == "Secret" && strings.HasPrefix(o.GetName(), HookTokenSecret+"-") {
			generated = o.GetName()
		}
	}
	if generated == "" {
		t.Fatal("the overlay made no hook token Secret")
	}
	w := wiringOf(t, map[string][]*unstructured.Unstructured{"all": objs})
	for _, name := range []string{"metalambda-engine", "metalambda-gateway"} {
		if w.mounts[name] != generated {
			t.Errorf("%s mounts %q, want the generated %q", name, w.mounts[name], generated)
		}
	}
}
