//go:build integration

package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/kubetest"
)

// The functions of the env source tests answer with the variables they were given.
const (
	envPy = `import os

def sync(request):
    return {"status": {k: os.environ.get(v) for k, v in [("password", "PASSWORD"), ("user", "DB_user"), ("plain", "PLAIN"), ("maybe", "MAYBE")]}}
`
	envJS = `function sync(request) {
  return {status: {password: process.env.PASSWORD, mode: process.env.MODE}};
}`
	// snoopPy reads every environment and command line it can find in /proc, and
	// its own environment.
	snoopPy = `import os

def sync(request):
    seen, own = [], 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        for name in ("environ", "cmdline"):
            try:
                with open("/proc/%s/%s" % (pid, name), "rb") as f:
                    seen.append(f.read().decode("latin-1"))
            except OSError:
                pass
    seen.extend("%s=%s" % kv for kv in os.environ.items())
    return {"status": {"seen": "\n".join(seen), "read": len(seen)}}
`
)

func randomValue(t *testing.T) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "pw-" + hex.EncodeToString(b)
}

func createFunctionSpec(t *testing.T, ns, name string, spec map[string]any) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metalambda.dev/v1alpha1", "kind": "Function",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
	if _, err := env.Dynamic.Resource(FunctionsGVR).Namespace(ns).Create(kubetest.Context(t), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Function %s: %v", name, err)
	}
}

func putSecret(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	ctx := kubetest.Context(t)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: data}
	if _, err := env.Kube.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{}); err == nil {
		return
	}
	if _, err := env.Kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// hookUntil calls a function's hook until check accepts its answer.
func (g *testGateway) hookUntil(t *testing.T, ns, name, what string, check func(reply) bool) reply {
	t.Helper()
	var last reply
	kubetest.Eventually(t, 45*time.Second, name+": "+what, func(context.Context) (bool, error) {
		last = g.do(t, "POST", "/hooks/"+ns+"/"+name, "", hookRequest("p"))
		return check(last), fmt.Errorf("%d %s", last.status, last.raw)
	})
	return last
}

func statusField(r reply, key string) any {
	status, _ := r.body["status"].(map[string]any)
	return status[key]
}

// grantAsTold runs the grant that a Function's Ready message proposes, as the
// cluster's admin with kubectl, exactly as a user would paste it.
func grantAsTold(t *testing.T, message string) {
	t.Helper()
	_, command, ok := strings.Cut(message, "grant it: ")
	if !ok {
		t.Fatalf("the message proposes no grant: %s", message)
	}
	cmd := exec.Command("sh", "-c", command)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Cluster.KubeconfigPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", command, err, out)
	}
}

// TestFunctionsReadSecretsAtCallTime runs the gateway as a ServiceAccount bound to
// the shipped metalambda-gateway ClusterRole, which reads no Secret: a Python and a
// JavaScript Function whose env reads a Secret and a ConfigMap fail, with the grant
// to run in their status and their calls' errors; once it is run they read the
// values, a changed Secret reaches them within the cache's TTL, no value shows in
// a status, the metrics or a worker's command line, another function cannot read
// them, and a revoked grant stops them again.
func TestFunctionsReadSecretsAtCallTime(t *testing.T) {
	applyShippedRBAC(t)
	ns := env.Namespace(t)
	ctx := kubetest.Context(t)
	cfg := env.ConfigFor(serviceAccount(t, ns, "gateway", true, clusterRole("metalambda-gateway")))
	g := startGatewayWith(t, cfg, func(o *Options) { o.EnvSourceTTL = 2 * time.Second })

	password := randomValue(t)
	putSecret(t, ns, "db", map[string]string{"password": password, "user": "admin"})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"mode": "fast"}}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createFunctionSpec(t, ns, "py", map[string]any{"runtime": "python", "source": envPy,
		"env":          map[string]any{"PLAIN": "plain", "DB_user": "from-env"},
		"envFrom":      []any{map[string]any{"prefix": "DB_", "secretRef": map[string]any{"name": "db"}}},
		"envValueFrom": map[string]any{"PASSWORD": map[string]any{"secretKeyRef": map[string]any{"name": "db", "key": "password"}}},
	})
	createFunctionSpec(t, ns, "js", map[string]any{"runtime": "javascript", "source": envJS,
		"envValueFrom": map[string]any{
			"MODE":     map[string]any{"configMapKeyRef": map[string]any{"name": "settings", "key": "mode"}},
			"PASSWORD": map[string]any{"secretKeyRef": map[string]any{"name": "db", "key": "password"}},
		},
	})
	createFunctionSpec(t, ns, "optional", map[string]any{"runtime": "python", "source": envPy,
		"envFrom":      []any{map[string]any{"secretRef": map[string]any{"name": "absent", "optional": true}}},
		"envValueFrom": map[string]any{"MAYBE": map[string]any{"secretKeyRef": map[string]any{"name": "absent", "key": "k", "optional": true}}},
	})
	createFunction(t, ns, "snoop", "python", snoopPy, 0)

	// Not granted: the status and the calls say which object, why, and the fix.
	gatewayUser := "system:serviceaccount:" + ns + ":gateway"
	fn := waitFunction(t, ns, "py", func(o *unstructured.Unstructured) error { return readyIs(o, "False", "EnvSourceUnavailable") })
	msg := readyMessage(fn)
	for _, want := range []string{"function " + ns + "/py", `spec.envFrom[0].secretRef: secret "db"`, "the gateway's account " + gatewayUser + " may not get secrets in namespace " + ns,
		"grant it: kubectl -n " + ns + " create role metalambda-gateway-secret-db --verb=get --resource=secrets --resource-name=db && kubectl -n " + ns + " create rolebinding metalambda-gateway-secret-db --role=metalambda-gateway-secret-db --serviceaccount=" + ns + ":gateway"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Ready message %q lacks %q", msg, want)
		}
	}
	if r := g.do(t, "POST", "/hooks/"+ns+"/py", "", hookRequest("p")); r.status != http.StatusServiceUnavailable || r.body["error"] != "env_source_unavailable" || r.body["message"] != msg {
		t.Errorf("hook without the grant = %d %s, want 503 env_source_unavailable with the status's message", r.status, r.raw)
	}

	// The grants, as the messages propose them.
	grantAsTold(t, msg)
	r := g.hookUntil(t, ns, "py", "reads the Secret", func(r reply) bool { return r.status == 200 })
	if got := statusField(r, "password"); got != password {
		t.Errorf("PASSWORD (envValueFrom) = %v, want the Secret's value", got)
	}
	if got, plain := statusField(r, "user"), statusField(r, "plain"); got != "from-env" || plain != "plain" {
		t.Errorf("DB_user = %v (env wins over envFrom), PLAIN = %v", got, plain)
	}
	waitFunction(t, ns, "py", func(o *unstructured.Unstructured) error { return readyIs(o, "True", "Compiled") })
	// The JavaScript function reads the ConfigMap first (MODE), then the Secret
	// already granted.
	r = g.do(t, "POST", "/hooks/"+ns+"/js", "", hookRequest("p"))
	if r.body["error"] != "env_source_unavailable" || !strings.Contains(r.raw, `spec.envValueFrom[MODE].configMapKeyRef: configmap \"settings\"`) {
		t.Fatalf("js before its grant = %d %s, want 503 naming the ConfigMap", r.status, r.raw)
	}
	grantAsTold(t, r.body["message"].(string))
	r = g.hookUntil(t, ns, "js", "reads the ConfigMap and the Secret", func(r reply) bool { return r.status == 200 })
	if statusField(r, "password") != password || statusField(r, "mode") != "fast" {
		t.Errorf("js answered %s", r.raw)
	}

	// An optional source that does not exist sets nothing, once the gateway may look.
	r = g.do(t, "POST", "/hooks/"+ns+"/optional", "", hookRequest("p"))
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.raw, `secret \"absent\"`) {
		t.Fatalf("optional before its grant = %d %s, want 503 naming the secret: forbidden is not missing", r.status, r.raw)
	}
	grantAsTold(t, r.body["message"].(string))
	r = g.hookUntil(t, ns, "optional", "runs without its optional Secret", func(r reply) bool { return r.status == 200 })
	if got := statusField(r, "maybe"); got != nil {
		t.Errorf("MAYBE from a missing optional Secret = %v, want unset", got)
	}

	// A changed Secret reaches both runtimes within the TTL (2 s here) and a new
	// worker's start.
	rotated := randomValue(t)
	putSecret(t, ns, "db", map[string]string{"password": rotated, "user": "admin"})
	for _, name := range []string{"py", "js"} {
		g.hookUntil(t, ns, name, "sees the new password", func(r reply) bool { return r.status == 200 && statusField(r, "password") == rotated })
	}

	// No value in a status, the metrics or a worker's command line (which every
	// user of the host can read).
	for _, name := range []string{"py", "js"} {
		obj, err := env.Dynamic.Resource(FunctionsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if data, _ := obj.MarshalJSON(); strings.Contains(string(data), rotated) || strings.Contains(string(data), password) {
			t.Errorf("Function %s shows a Secret's value: %s", name, data)
		}
	}
	if m := g.do(t, "GET", "/metrics", g.token, nil); strings.Contains(m.raw, rotated) {
		t.Error("the metrics show a Secret's value")
	}
	pids := append(lambda.PythonWorkerPIDs(os.Getpid(), ns+"/py"), lambda.ScriptWorkerPIDs(os.Getpid(), ns+"/js")...)
	if len(pids) == 0 {
		t.Fatal("no worker of py or js found")
	}
	for _, pid := range pids {
		if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(cmdline), rotated) {
			t.Errorf("worker %d's command line shows the Secret's value", pid)
		}
	}

	// Another function cannot read them, though py's workers run beside it.
	r = g.hookUntil(t, ns, "snoop", "answers", func(r reply) bool { return r.status == 200 })
	if read, _ := statusField(r, "read").(float64); read < 2 || !strings.Contains(fmt.Sprint(statusField(r, "seen")), "PATH=") {
		t.Fatalf("snoop read nothing, so it proves nothing: %s", r.raw)
	}
	if strings.Contains(r.raw, rotated) || strings.Contains(r.raw, password) {
		t.Errorf("another function read the Secret's value: %.500s", r.raw)
	}

	// A revoked grant stops the function again: its workers hold values the
	// gateway may no longer read.
	if err := env.Kube.RbacV1().RoleBindings(ns).Delete(ctx, "metalambda-gateway-secret-db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	g.hookUntil(t, ns, "py", "fails once the grant is gone", func(r reply) bool {
		return r.status == http.StatusServiceUnavailable && r.body["error"] == "env_source_unavailable"
	})
	waitFunction(t, ns, "py", func(o *unstructured.Unstructured) error { return readyIs(o, "False", "EnvSourceUnavailable") })
}

// TestFunctionAPIChecksEnvSources: through the API, a developer may make a function
// read only Secrets and ConfigMaps the developer may get (403 naming the object
// otherwise); bad references answer 422 naming the field; kubectl meets the CRD's
// rules.
func TestFunctionAPIChecksEnvSources(t *testing.T) {
	applyShippedRBAC(t)
	g := startGateway(t, func(o *Options) { o.AuthCacheTTL = time.Millisecond })
	ns := env.Namespace(t)
	ctx := kubetest.Context(t)
	devToken := serviceAccount(t, ns, "dev", false, clusterRole("metalambda-function-developer"))
	putSecret(t, ns, "db", map[string]string{"password": randomValue(t)})
	base := "/v1/namespaces/" + ns + "/functions"
	body := map[string]any{"name": "f", "runtime": "python", "source": envPy,
		"envValueFrom": map[string]any{"PASSWORD": map[string]any{"secretKeyRef": map[string]any{"name": "db", "key": "password"}}}}

	g.waitStatus(t, "GET", base, devToken, nil, http.StatusOK) // the developer's binding is in force
	r := g.do(t, "POST", base, devToken, body)
	if want := `user "system:serviceaccount:` + ns + `:dev" may not get secret "db" in namespace "` + ns + `", which spec.envValueFrom[PASSWORD].secretKeyRef names`; r.body["message"] == nil || !strings.Contains(r.body["message"].(string), want) {
		t.Errorf("create without get on the Secret = %d %s, want 403 with %q", r.status, r.raw, want)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "db-reader"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"db"}, Verbs: []string{"get"}}}}
	if _, err := env.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dev-db-reader"}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "db-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "dev", Namespace: ns}}}
	if _, err := env.Kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	g.waitStatus(t, "POST", base, devToken, body, http.StatusCreated)
	g.hookUntil(t, ns, "f", "reads the Secret", func(r reply) bool { return r.status == 200 && statusField(r, "password") != nil })

	for _, tt := range []struct {
		name string
		spec map[string]any
		want string
	}{
		{"both refs", map[string]any{"envFrom": []any{map[string]any{"secretRef": map[string]any{"name": "db"}, "configMapRef": map[string]any{"name": "db"}}}}, "spec.envFrom[0].configMapRef: Forbidden: may not be set with secretRef"},
		{"no ref", map[string]any{"envFrom": []any{map[string]any{"prefix": "X_"}}}, "spec.envFrom[0]: Required value: one of secretRef and configMapRef"},
		{"bad name", map[string]any{"envValueFrom": map[string]any{"A": map[string]any{"secretKeyRef": map[string]any{"name": "Bad_Name", "key": "k"}}}}, `spec.envValueFrom[A].secretKeyRef.name: Invalid value: "Bad_Name"`},
		{"no key", map[string]any{"envValueFrom": map[string]any{"A": map[string]any{"configMapKeyRef": map[string]any{"name": "db"}}}}, "spec.envValueFrom[A].configMapKeyRef.key: Required value"},
		{"also in env", map[string]any{"env": map[string]any{"A": "1"}, "envValueFrom": map[string]any{"A": map[string]any{"secretKeyRef": map[string]any{"name": "db", "key": "password"}}}}, "also set in spec.env"},
		{"loader variable", map[string]any{"env": map[string]any{"LD_PRELOAD": "/tmp/evil.so"}}, "spec.env[LD_PRELOAD]: Invalid value: \"LD_PRELOAD\": variable LD_PRELOAD is reserved"},
	} {
		spec := map[string]any{"name": "bad", "runtime": "python", "source": envPy}
		for k, v := range tt.spec {
			spec[k] = v
		}
		if r := g.do(t, "POST", base, g.token, spec); r.status != http.StatusUnprocessableEntity || r.body["error"] != "invalid_env" || !strings.Contains(fmt.Sprint(r.body["message"]), tt.want) {
			t.Errorf("API, %s: %d %s, want 422 invalid_env with %q", tt.name, r.status, r.raw, tt.want)
		}
	}

	// kubectl's door: the CRD's schema and rules refuse the same, naming the field.
	for _, tt := range []struct {
		name string
		spec map[string]any
		want []string
	}{
		{"both refs", map[string]any{"envFrom": []any{map[string]any{"secretRef": map[string]any{"name": "db"}, "configMapRef": map[string]any{"name": "db"}}}}, []string{"spec.envFrom[0]", "set exactly one of secretRef and configMapRef"}},
		{"no key ref", map[string]any{"envValueFrom": map[string]any{"A": map[string]any{}}}, []string{"spec.envValueFrom[A]", "set exactly one of secretKeyRef and configMapKeyRef"}},
		{"bad name", map[string]any{"envFrom": []any{map[string]any{"configMapRef": map[string]any{"name": "Bad_Name"}}}}, []string{"spec.envFrom[0].configMapRef.name"}},
		{"also in env", map[string]any{"env": map[string]any{"A": "1"}, "envValueFrom": map[string]any{"A": map[string]any{"secretKeyRef": map[string]any{"name": "db", "key": "password"}}}}, []string{"spec.envValueFrom", "a variable may not be both in env and in envValueFrom"}},
		{"bad variable", map[string]any{"envValueFrom": map[string]any{"A=B": map[string]any{"secretKeyRef": map[string]any{"name": "db", "key": "password"}}}}, []string{"spec.envValueFrom", "printable ASCII characters other than '='"}},
		{"loader variable", map[string]any{"env": map[string]any{"LD_PRELOAD": "/tmp/evil.so"}}, []string{"spec.env", "are reserved and cannot be set"}},
		{"loader prefix", map[string]any{"envFrom": []any{map[string]any{"prefix": "LD_", "secretRef": map[string]any{"name": "db"}}}}, []string{"spec.envFrom[0].prefix", "a prefix may not start a reserved name"}},
	} {
		spec := map[string]any{"runtime": "python", "source": envPy}
		for k, v := range tt.spec {
			spec[k] = v
		}
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "metalambda.dev/v1alpha1", "kind": "Function", "metadata": map[string]any{"name": "bad"}, "spec": spec}}
		_, err := env.Dynamic.Resource(FunctionsGVR).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
		for _, want := range tt.want {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("kubectl, %s: %v, want an error with %q", tt.name, err, want)
			}
		}
	}
}
