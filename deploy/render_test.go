package deploy

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

var update = flag.Bool("update", false, "rewrite the kustomize bases from the chart")

const generatedHeader = "# Rendered from deploy/helm/metalambda by `go test ./deploy -args -update`: edit the chart, not this file.\n"

// writeKustomize writes v's kustomize base: the chart's objects, a file per
// template, the Namespace (at v.PodSecurity) and a kustomization.
func writeKustomize(t *testing.T, v Variant, rendered map[string][]*unstructured.Unstructured) {
	t.Helper()
	dir := KustomizeDir(v.Name)
	old, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	resources := []string{"namespace.yaml"}
	ns := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels:
    pod-security.kubernetes.io/enforce: %[2]s
    pod-security.kubernetes.io/warn: %[2]s
`, v.Namespace, v.PodSecurity)
	if err := os.WriteFile(filepath.Join(dir, "namespace.yaml"), []byte(generatedHeader+ns), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Sorted(maps.Keys(rendered)) {
		data, err := Encode(rendered[name])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), append([]byte(generatedHeader), data...), 0o644); err != nil {
			t.Fatal(err)
		}
		resources = append(resources, name)
	}
	// Every namespaced object names its namespace already. The base sets no
	// namespace: kustomize would also give one to the cluster-scoped objects of
	// kinds it does not know (CompositeControllers).
	k := generatedHeader + "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
	for _, r := range resources {
		k += "- " + r + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
}

// kustomizeBuild builds a base with the kustomize API, as `kubectl kustomize` does.
func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := resources.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestKustomizeMatchesChart: each kustomize base builds exactly the objects the
// chart renders with that base's values (plus the Namespace, which Helm leaves to
// --create-namespace). With -update it rewrites the bases first.
func TestKustomizeMatchesChart(t *testing.T) {
	for _, v := range Variants {
		t.Run(v.Name, func(t *testing.T) {
			rendered, err := RenderChart(v)
			if err != nil {
				t.Fatal(err)
			}
			if *update {
				writeKustomize(t, v, rendered)
			}
			var fromChart []*unstructured.Unstructured
			for _, objs := range rendered {
				fromChart = append(fromChart, objs...)
			}
			var fromKustomize []*unstructured.Unstructured
			sawNamespace := false
			for _, o := range kustomizeBuild(t, KustomizeDir(v.Name)) {
				if o.GetKind() == "Namespace" && o.GetName() == v.Namespace {
					sawNamespace = true
					continue
				}
				fromKustomize = append(fromKustomize, o)
			}
			if !sawNamespace {
				t.Errorf("the kustomize base does not create namespace %s", v.Namespace)
			}
			a, err := Encode(Sorted(fromChart))
			if err != nil {
				t.Fatal(err)
			}
			b, err := Encode(Sorted(fromKustomize))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(a), string(b)); diff != "" {
				t.Errorf("kustomize/%s differs from the chart (-chart +kustomize); run `go test ./deploy -run TestKustomizeMatchesChart -args -update`:\n%s", v.Name, diff)
			}
		})
	}
}

// TestChartObjects checks what each install holds: its kinds, restricted pod
// security, a size limit on every emptyDir, and no wildcard rights unless asked for.
func TestChartObjects(t *testing.T) {
	for _, v := range Variants {
		t.Run(v.Name, func(t *testing.T) {
			rendered, err := RenderChart(v)
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, objs := range rendered {
				for _, o := range objs {
					keys = append(keys, Key(o))
					checkObject(t, v, o)
				}
			}
			slices.Sort(keys)
			want := []string{"CustomResourceDefinition//compositecontrollers.metacontroller.k8s.io", "Deployment/" + v.Namespace + "/"}
			for _, w := range want {
				if !slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, w) }) {
					t.Errorf("no object %s*; the install holds:\n%s", w, strings.Join(keys, "\n"))
				}
			}
		})
	}
}

func checkObject(t *testing.T, v Variant, o *unstructured.Unstructured) {
	t.Helper()
	switch o.GetKind() {
	case "Deployment":
		pod, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
		root := o.GetName() == "metalambda-gateway" && v.PodSecurity == "baseline"
		if nonRoot, _, _ := unstructured.NestedBool(pod, "securityContext", "runAsNonRoot"); !nonRoot && !root {
			t.Errorf("%s: runAsNonRoot is not set", Key(o))
		}
		if p, _, _ := unstructured.NestedString(pod, "securityContext", "seccompProfile", "type"); p != "RuntimeDefault" {
			t.Errorf("%s: seccompProfile %q, want RuntimeDefault", Key(o), p)
		}
		containers, _, _ := unstructured.NestedSlice(pod, "containers")
		for _, c := range containers {
			c := c.(map[string]any)
			if esc, found, _ := unstructured.NestedBool(c, "securityContext", "allowPrivilegeEscalation"); !found || esc {
				t.Errorf("%s: container %v allows privilege escalation", Key(o), c["name"])
			}
			if drop, _, _ := unstructured.NestedStringSlice(c, "securityContext", "capabilities", "drop"); !slices.Equal(drop, []string{"ALL"}) {
				t.Errorf("%s: container %v drops capabilities %v, want [ALL]", Key(o), c["name"], drop)
			}
			if ro, _, _ := unstructured.NestedBool(c, "securityContext", "readOnlyRootFilesystem"); !ro {
				t.Errorf("%s: container %v writes its root file system", Key(o), c["name"])
			}
			var want []string // what Pod Security restricted allows: nothing but NET_BIND_SERVICE
			if root {
				want = []string{"SETUID", "SETGID", "KILL"} // within baseline
			}
			if add, _, _ := unstructured.NestedStringSlice(c, "securityContext", "capabilities", "add"); !slices.Equal(add, want) {
				t.Errorf("%s: container %v adds capabilities %v, want %v", Key(o), c["name"], add, want)
			}
		}
		volumes, _, _ := unstructured.NestedSlice(pod, "volumes")
		for _, vol := range volumes {
			vol := vol.(map[string]any)
			if dir, ok := vol["emptyDir"].(map[string]any); ok && dir["sizeLimit"] == nil {
				t.Errorf("%s: emptyDir %v has no sizeLimit", Key(o), vol["name"])
			}
		}
	case "ClusterRole", "Role":
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, r := range rules {
			r := r.(map[string]any)
			for _, field := range []string{"apiGroups", "resources", "verbs"} {
				vals, _, _ := unstructured.NestedStringSlice(r, field)
				if slices.Contains(vals, "*") {
					t.Errorf("%s grants %s \"*\" (set engine.rbac.wildcard for that)", Key(o), field)
				}
			}
		}
	}
}

// TestChartGrantsEnvSourcesByName: gateway.envSources gives the gateway's
// ServiceAccount get on the Secrets and ConfigMaps it names, by name, in their
// namespaces, and nothing by default; an entry without a namespace or objects fails
// the render. Besides, the replicas may read their own namespace's EndpointSlices
// (to find each other), and nothing else there.
func TestChartGrantsEnvSourcesByName(t *testing.T) {
	platform := Variants[1]
	rendered, err := RenderChart(platform)
	if err != nil {
		t.Fatal(err)
	}
	if len(rendered["gateway.yaml"]) == 0 {
		t.Fatal("no gateway.yaml in the render")
	}
	const peersRole = "metalambda-gateway-peers"
	for _, o := range rendered["gateway.yaml"] {
		if o.GetKind() != "Role" {
			continue
		}
		if o.GetName() != peersRole {
			t.Errorf("the default install grants the gateway %s", Key(o))
			continue
		}
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		want := []any{map[string]any{"apiGroups": []any{"discovery.k8s.io"}, "resources": []any{"endpointslices"}, "verbs": []any{"get", "list", "watch"}}}
		if diff := cmp.Diff(want, rules); diff != "" || o.GetNamespace() != platform.Namespace {
			t.Errorf("%s grants (-want +got):\n%s", Key(o), diff)
		}
	}
	v := platform
	v.Values = map[string]any{"gateway": map[string]any{"envSources": []any{
		map[string]any{"namespace": "shop", "secrets": []any{"db"}, "configMaps": []any{"settings"}},
		map[string]any{"namespace": "billing", "secrets": []any{"stripe", "smtp"}},
	}}}
	if rendered, err = RenderChart(v); err != nil {
		t.Fatal(err)
	}
	type grant struct{ namespace, resource, names string }
	var grants []grant
	bound := map[string]bool{}
	for _, o := range rendered["gateway.yaml"] {
		if o.GetName() == peersRole {
			continue
		}
		switch o.GetKind() {
		case "Role":
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			for _, r := range rules {
				r := r.(map[string]any)
				resources, _, _ := unstructured.NestedStringSlice(r, "resources")
				names, _, _ := unstructured.NestedStringSlice(r, "resourceNames")
				verbs, _, _ := unstructured.NestedStringSlice(r, "verbs")
				if !slices.Equal(verbs, []string{"get"}) {
					t.Errorf("%s grants %v, want get alone", Key(o), verbs)
				}
				grants = append(grants, grant{o.GetNamespace(), strings.Join(resources, ","), strings.Join(names, ",")})
			}
		case "RoleBinding":
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			s := subjects[0].(map[string]any)
			bound[o.GetNamespace()] = s["kind"] == "ServiceAccount" && s["name"] == "metalambda-gateway" && s["namespace"] == platform.Namespace
		}
	}
	want := []grant{{"shop", "secrets", "db"}, {"shop", "configmaps", "settings"}, {"billing", "secrets", "stripe,smtp"}}
	if diff := cmp.Diff(want, grants, cmp.AllowUnexported(grant{})); diff != "" {
		t.Errorf("grants (-want +got):\n%s", diff)
	}
	if !bound["shop"] || !bound["billing"] {
		t.Errorf("RoleBindings to the gateway's ServiceAccount: %v", bound)
	}
	for _, bad := range []map[string]any{{"secrets": []any{"db"}}, {"namespace": "shop"}} {
		v.Values = map[string]any{"gateway": map[string]any{"envSources": []any{bad}}}
		if _, err := RenderChart(v); err == nil || !strings.Contains(err.Error(), "gateway.envSources[0]") {
			t.Errorf("envSources %v: %v, want an error naming gateway.envSources[0]", bad, err)
		}
	}
}

// TestServiceMonitorScrapesTheGatewayWithAToken: the gateway's /metrics needs a
// token, so its ServiceMonitor sends Prometheus's own; the engine's needs none.
func TestServiceMonitorScrapesTheGatewayWithAToken(t *testing.T) {
	v := Variants[1]
	v.Values = map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}}
	rendered, err := RenderChart(v)
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	for _, o := range rendered["metrics.yaml"] {
		if o.GetKind() != "ServiceMonitor" {
			continue
		}
		endpoints, _, _ := unstructured.NestedSlice(o.Object, "spec", "endpoints")
		tokens[o.GetName()], _, _ = unstructured.NestedString(endpoints[0].(map[string]any), "bearerTokenFile")
	}
	want := map[string]string{"metalambda-gateway": "/var/run/secrets/kubernetes.io/serviceaccount/token", "metalambda-engine": ""}
	if diff := cmp.Diff(want, tokens); diff != "" {
		t.Errorf("ServiceMonitors' bearerTokenFile (-want +got):\n%s", diff)
	}
}

// TestChartSecureCookies: gateway.secureCookies passes --secure-cookies; off by
// default, as the chart serves the dashboard over plain HTTP.
func TestChartSecureCookies(t *testing.T) {
	for _, on := range []bool{false, true} {
		v := Variants[1]
		v.Values = map[string]any{"gateway": map[string]any{"secureCookies": on}}
		rendered, err := RenderChart(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range rendered["gateway.yaml"] {
			if o.GetKind() != "Deployment" {
				continue
			}
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
			if got := slices.Contains(args, "--secure-cookies"); got != on {
				t.Errorf("secureCookies %v: args %v", on, args)
			}
		}
	}
}

// TestChartTracing: tracing.env reaches the engine and the gateway, besides the env
// they have, in both variants (the engine alone has no env without it), and
// tracing.traceURLTemplate passes --trace-url-template.
func TestChartTracing(t *testing.T) {
	otlp := map[string]any{"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://collector:4318"}
	for _, base := range Variants {
		v := base
		v.Values = map[string]any{"tracing": map[string]any{"env": []any{otlp}, "traceURLTemplate": "http://jaeger:16686/trace/{traceID}"}}
		maps.Copy(v.Values, base.Values)
		rendered, err := RenderChart(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range []string{"engine.yaml", "gateway.yaml"} {
			for _, o := range rendered[file] {
				if o.GetKind() != "Deployment" {
					continue
				}
				containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
				c := containers[0].(map[string]any)
				env, _, _ := unstructured.NestedSlice(c, "env")
				if !slices.ContainsFunc(env, func(e any) bool { return cmp.Equal(e, otlp) }) {
					t.Errorf("%s %s: env %v has no %v", v.Name, o.GetName(), env, otlp)
				}
				args, _, _ := unstructured.NestedStringSlice(c, "args")
				if file == "gateway.yaml" && !slices.Contains(args, "--trace-url-template=http://jaeger:16686/trace/{traceID}") {
					t.Errorf("%s gateway args %v have no --trace-url-template", v.Name, args)
				}
			}
		}
	}
}

// TestChartWorkerUsers: by default the gateway runs as root with SETUID, SETGID
// and KILL alone (Pod Security baseline), so that each worker has a user of its
// own; gateway.workerUsers "shared" keeps the restricted form of every pod; any
// other value fails the render, naming the two.
func TestChartWorkerUsers(t *testing.T) {
	for _, c := range []struct {
		users     string
		uid       int64
		nonRoot   bool
		add       []string
		baseline  bool
		wantError string
	}{
		{users: "", uid: 0, add: []string{"SETUID", "SETGID", "KILL"}, baseline: true},
		{users: "own", uid: 0, add: []string{"SETUID", "SETGID", "KILL"}, baseline: true},
		{users: "shared", uid: 65532, nonRoot: true},
		{users: "mine", wantError: `gateway.workerUsers is "mine": want own`},
	} {
		name := c.users
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			v := Variants[1]
			v.PodSecurity = "restricted"
			if c.baseline {
				v.PodSecurity = "baseline"
			}
			if c.users != "" {
				v.Values = map[string]any{"gateway": map[string]any{"workerUsers": c.users}}
			}
			rendered, err := RenderChart(v)
			if c.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantError) {
					t.Fatalf("render: %v, want an error saying %q", err, c.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, o := range rendered["gateway.yaml"] {
				if o.GetKind() != "Deployment" {
					continue
				}
				found = true
				checkObject(t, v, o)
				pod, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
				raw, _, _ := unstructured.NestedFieldNoCopy(pod, "securityContext", "runAsUser")
				uid, _ := strconv.ParseInt(fmt.Sprint(raw), 10, 64)
				nonRoot, _, _ := unstructured.NestedBool(pod, "securityContext", "runAsNonRoot")
				containers, _, _ := unstructured.NestedSlice(pod, "containers")
				add, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "securityContext", "capabilities", "add")
				if uid != c.uid || nonRoot != c.nonRoot || !slices.Equal(add, c.add) {
					t.Errorf("runAsUser %d, runAsNonRoot %v, capabilities added %v; want %d, %v, %v", uid, nonRoot, add, c.uid, c.nonRoot, c.add)
				}
			}
			if !found {
				t.Fatal("no gateway Deployment")
			}
		})
	}
}
