//go:build integration

package deploy

import (
	"context"
	"fmt"
	"io"
	"log"
	"path/filepath"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/metalambda/metalambda/functions"
	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine"
	"github.com/metalambda/metalambda/internal/gateway"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/kubetest/start"
	"github.com/metalambda/metalambda/internal/local/cluster"
)

var env *kubetest.Env

func TestMain(m *testing.M) {
	lambda.ServeWorker()      // the gateway's sandbox starts this binary as its launcher and workers
	log.SetOutput(io.Discard) // the chart loader logs every symbolic link it follows
	kubetest.Main(m, &env, cluster.Defaults())
}

// TestPlatformInstallRunsWithItsOwnRights applies the platform's kustomize base (the
// chart's objects) to a real control plane, runs the engine and the gateway with
// their ServiceAccounts' own tokens, not the admin's, and runs both operators through
// them: the rendered RBAC is enough. Then it checks it is not more: the gateway's
// account is refused Secrets and Pods, and the engine's account Secrets.
func TestPlatformInstallRunsWithItsOwnRights(t *testing.T) {
	ctx := kubetest.Context(t)
	const ns = "metalambda-system"
	for _, o := range kustomizeBuild(t, KustomizeDir("platform")) {
		one, err := Encode([]*unstructured.Unstructured{o})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.Apply(ctx, one); err != nil {
			t.Fatalf("apply %s: %v", Key(o), err)
		}
	}
	kubetest.Eventually(t, 30*time.Second, "the engine's ClusterRole aggregates its rules", func(ctx context.Context) (bool, error) {
		cr, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, "metalambda-engine", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(cr.Rules) >= 6, fmt.Errorf("%d rules", len(cr.Rules))
	})

	gatewayCfg := env.ConfigFor(env.Token(t, ns, "metalambda-gateway"))
	engineCfg := env.ConfigFor(env.Token(t, ns, "metalambda-engine"))

	// The gateway, as its Deployment runs it: hooks on their own listener.
	gwOpts := gateway.Defaults()
	gwOpts.PublicURL, gwOpts.SeparateHooks, gwOpts.Runtime.Builtins = "http://metalambda-gateway."+ns, true, functions.Builtins()
	hooks := start.StartGateway(t, gatewayCfg, gwOpts)
	opts := engine.Defaults()
	opts.ResolveService = func(ref v1alpha1.ServiceReference) (string, bool) {
		return hooks.URL, ref.Name == "metalambda-gateway" && ref.Namespace == ns
	}
	opts.TenantGateways = []string{"http://metalambda-gateway." + ns}
	start.StartEngine(t, engineCfg, opts)

	root := filepath.Join(Dir(), "..")
	env.ApplyFile(t, filepath.Join(root, "operators", "pythonlambda", "sample.yaml"))
	env.ApplyFile(t, filepath.Join(root, "operators", "immortalcontainer", "sample.yaml"))

	lambdas := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "pythonlambdas"}
	kubetest.Eventually(t, 90*time.Second, "the PythonLambda's children exist and its status counts its pods", func(ctx context.Context) (bool, error) {
		p, err := env.Dynamic.Resource(lambdas).Namespace("python-lambda-operator").Get(ctx, "demo-python-lambda", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		status, _ := p.Object["status"].(map[string]any)
		sel := engine.ControllerUIDLabel + "=" + string(p.GetUID())
		cms, err := env.Kube.CoreV1().ConfigMaps("python-lambda-operator").List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, err
		}
		ings, err := env.Kube.NetworkingV1().Ingresses("python-lambda-operator").List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, err
		}
		return len(cms.Items) == 1 && len(ings.Items) == 1 && fmt.Sprint(status["pods"]) == "2", fmt.Errorf("%d configmaps, %d ingresses, status %v", len(cms.Items), len(ings.Items), status)
	})
	kubetest.Eventually(t, 60*time.Second, "the ImmortalContainer's pod exists", func(ctx context.Context) (bool, error) {
		pods, err := env.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Name == "example-immortal-container-immortalpod" {
				return true, nil
			}
		}
		return false, fmt.Errorf("%d pods in default", len(pods.Items))
	})

	// The gateway records a Function's revisions with its own rights.
	fn := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metalambda.dev/v1alpha1", "kind": "Function", "metadata": map[string]any{"name": "revisions", "namespace": "default"},
		"spec": map[string]any{"runtime": "jsonnet", "source": "function(request) {children: []}"},
	}}
	if _, err := env.Dynamic.Resource(gateway.FunctionsGVR).Namespace("default").Create(ctx, fn, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 30*time.Second, "the gateway records the Function's first revision", func(ctx context.Context) (bool, error) {
		revs, err := env.Dynamic.Resource(gateway.ControllerRevisionsGVR).Namespace("default").List(ctx, metav1.ListOptions{LabelSelector: gateway.FunctionLabel + "=revisions"})
		if err != nil {
			return false, err
		}
		return len(revs.Items) == 1, fmt.Errorf("%d ControllerRevisions", len(revs.Items))
	})

	// Not more than needed.
	asGateway := kubernetes.NewForConfigOrDie(gatewayCfg)
	asEngine := kubernetes.NewForConfigOrDie(engineCfg)
	// The gateway writes Functions with its callers' tokens; it may not act as anyone.
	impersonating := rest.CopyConfig(gatewayCfg)
	impersonating.Impersonate = rest.ImpersonationConfig{UserName: "admin", Groups: []string{"system:masters"}}
	asAdminViaGateway := kubernetes.NewForConfigOrDie(impersonating)
	for what, err := range map[string]error{
		"the gateway impersonates an administrator": listErr(asAdminViaGateway.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})),
		"the gateway lists Secrets":                 listErr(asGateway.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})),
		// Functions' env sources are granted per namespace and name (gateway.envSources).
		"the gateway gets a Secret": listErr(asGateway.CoreV1().Secrets("default").Get(ctx, "any", metav1.GetOptions{})),
		"the gateway lists Pods":    listErr(asGateway.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})),
		"the engine lists Secrets":  listErr(asEngine.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", what, err)
		}
	}
	namespacedControllerRunsAsItsServiceAccount(t, asEngine)
}

// namespacedControllerRunsAsItsServiceAccount: a tenant's controller of a type of
// the tenant's converges through the engine run with its own account, which may
// write none of that type: it acts as the tenant's ServiceAccount.
func namespacedControllerRunsAsItsServiceAccount(t *testing.T, asEngine kubernetes.Interface) {
	ctx := kubetest.Context(t)
	notes := schema.GroupVersionResource{Group: "tenant.test.metalambda.dev", Version: "v1", Resource: "notes"}
	env.InstallCRDs(t, kubetest.SchemalessCRD(notes.Group, "Note", "notes", "note"))
	tenant := env.Namespace(t)
	env.ServiceAccount(t, tenant, "ctl")
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "ctl"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{notes.Group}, Resources: []string{"notes"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{notes.Group}, Resources: []string{"notes/status"}, Verbs: []string{"update"}},
	}}
	if _, err := env.Kube.RbacV1().Roles(tenant).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "ctl"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "ctl"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "ctl", Namespace: tenant}},
	}
	if _, err := env.Kube.RbacV1().RoleBindings(tenant).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The engine's own account may not write the tenant's type.
	for _, verb := range []string{"create", "update", "patch", "delete"} {
		review, err := asEngine.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:metalambda-system:metalambda-engine",
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:metalambda-system", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: tenant, Verb: verb, Group: notes.Group, Resource: "notes"},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed {
			t.Errorf("the engine's account may %s notes in %s", verb, tenant)
		}
	}
	// A Function of the tenant as the hook: a child Note per parent Note.
	fn := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metalambda.dev/v1alpha1", "kind": "Function", "metadata": map[string]any{"name": "copy", "namespace": tenant},
		"spec": map[string]any{"runtime": "jsonnet", "source": `function(request) {status: {copied: true}, children: if std.objectHas(request.parent.spec, "copy") then [] else [{apiVersion: "tenant.test.metalambda.dev/v1", kind: "Note", metadata: {name: request.parent.metadata.name + "-copy"}, spec: {copy: true}}]}`},
	}}
	if _, err := env.Dynamic.Resource(gateway.FunctionsGVR).Namespace(tenant).Create(ctx, fn, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ncc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metalambda.dev/v1alpha1", "kind": "NamespacedCompositeController",
		"metadata": map[string]any{"name": "copier", "namespace": tenant},
		"spec": map[string]any{
			"serviceAccountName": "ctl", "generateSelector": true,
			"parentResource": map[string]any{"apiVersion": "tenant.test.metalambda.dev/v1", "resource": "notes", "labelSelector": map[string]any{"matchLabels": map[string]any{"role": "original"}}},
			"childResources": []any{map[string]any{"apiVersion": "tenant.test.metalambda.dev/v1", "resource": "notes"}},
			"hooks":          map[string]any{"sync": map[string]any{"webhook": map[string]any{"service": map[string]any{"name": "metalambda-gateway", "namespace": "metalambda-system"}, "path": "/hooks/" + tenant + "/copy"}}},
		},
	}}
	ncc.SetLabels(nil)
	nccGVR := schema.GroupVersionResource{Group: "metalambda.dev", Version: "v1alpha1", Resource: "namespacedcompositecontrollers"}
	env.Create(t, nccGVR, tenant, ncc)
	note := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tenant.test.metalambda.dev/v1", "kind": "Note",
		"metadata": map[string]any{"name": "n", "labels": map[string]any{"role": "original"}}, "spec": map[string]any{},
	}}
	env.Create(t, notes, tenant, note)
	env.WaitFor(t, "the tenant's controller writes the child Note as its ServiceAccount", notes, tenant, "n-copy", nil)
}

func listErr[T any](_ T, err error) error { return err }
