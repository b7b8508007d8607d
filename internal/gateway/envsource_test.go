package gateway

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newTestEnvCache(objs ...runtime.Object) (*envCache, *fake.Clientset, *fakeClock) {
	kube := fake.NewClientset(objs...)
	c := newEnvCache(kube, 10*time.Second, 2*time.Second, 16)
	clock := &fakeClock{t: time.Unix(1000, 0)}
	c.now = clock.now
	return c, kube, clock
}

func secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func gets(kube *fake.Clientset, resource string) int {
	n := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

// TestEnvCacheKeepsValuesForItsTTL: a value is read once per TTL; a change is seen
// after it, a missing object is retried after the negative TTL.
func TestEnvCacheKeepsValuesForItsTTL(t *testing.T) {
	ctx := context.Background()
	c, kube, clock := newTestEnvCache(secret("db", map[string]string{"password": "one"}))
	for range 3 {
		data, err := c.get(ctx, "ns", kindSecret, "db")
		if err != nil || data["password"] != "one" {
			t.Fatalf("get = %v, %v", data, err)
		}
	}
	if n := gets(kube, "secrets"); n != 1 {
		t.Errorf("%d GETs for three reads within the TTL, want 1", n)
	}
	if _, err := kube.CoreV1().Secrets("ns").Update(ctx, secret("db", map[string]string{"password": "two"}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	clock.t = clock.t.Add(9 * time.Second)
	if data, _ := c.get(ctx, "ns", kindSecret, "db"); data["password"] != "one" {
		t.Errorf("within the TTL: %q, want the cached value", data["password"])
	}
	clock.t = clock.t.Add(2 * time.Second)
	if data, _ := c.get(ctx, "ns", kindSecret, "db"); data["password"] != "two" {
		t.Errorf("after the TTL: %q, want the new value", data["password"])
	}

	if _, err := c.get(ctx, "ns", kindConfigMap, "settings"); !apierrors.IsNotFound(err) {
		t.Fatalf("a missing ConfigMap: %v, want not found", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "settings"}, Data: map[string]string{"mode": "fast"}}
	if _, err := kube.CoreV1().ConfigMaps("ns").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.get(ctx, "ns", kindConfigMap, "settings"); !apierrors.IsNotFound(err) {
		t.Errorf("within the negative TTL: %v, want the cached not found", err)
	}
	clock.t = clock.t.Add(3 * time.Second)
	if data, err := c.get(ctx, "ns", kindConfigMap, "settings"); err != nil || data["mode"] != "fast" {
		t.Errorf("after the negative TTL: %v, %v", data, err)
	}
}

func TestResolveEnvInAPodsOrder(t *testing.T) {
	c, _, _ := newTestEnvCache(
		secret("db", map[string]string{"user": "admin", "password": "s3cret"}),
		secret("override", map[string]string{"user": "other"}),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "settings"}, Data: map[string]string{"mode": "fast"}},
	)
	src := &envSources{
		EnvFrom: []fnv1.EnvFromSource{
			{SecretRef: &fnv1.EnvSourceRef{Name: "db"}},
			{SecretRef: &fnv1.EnvSourceRef{Name: "override"}},
			{ConfigMapRef: &fnv1.EnvSourceRef{Name: "settings"}, Prefix: "CFG_"},
			{SecretRef: &fnv1.EnvSourceRef{Name: "absent", Optional: true}},
		},
		EnvValueFrom: map[string]fnv1.EnvVarSource{
			"PASSWORD": {SecretKeyRef: &fnv1.KeyRef{Name: "db", Key: "password"}},
			"MODE":     {ConfigMapKeyRef: &fnv1.KeyRef{Name: "settings", Key: "mode"}},
			"MAYBE":    {SecretKeyRef: &fnv1.KeyRef{Name: "db", Key: "absent", Optional: true}},
			"NOWHERE":  {SecretKeyRef: &fnv1.KeyRef{Name: "absent", Key: "x", Optional: true}},
		},
	}
	env, err := c.resolve(context.Background(), "ns/f", "ns", src)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"user": "other", "password": "s3cret", "CFG_mode": "fast", "PASSWORD": "s3cret", "MODE": "fast"}
	if diff := cmp.Diff(want, env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	merged := mergeEnv(env, map[string]string{"user": "plain"})
	if merged["user"] != "plain" {
		t.Errorf("plain env does not win: %q", merged["user"])
	}
	if envHash(env) == envHash(merged) || envHash(env) != envHash(maps.Clone(env)) {
		t.Errorf("envHash does not tell environments apart, or differs for equal ones")
	}
}

// TestResolveEnvErrorsNameTheFix: each unreadable source is an error that names the
// function, the field, the object and the fix, and never a value.
func TestResolveEnvErrorsNameTheFix(t *testing.T) {
	c, kube, _ := newTestEnvCache(secret("db", map[string]string{"password": "s3cret"}))
	kube.PrependReactor("get", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetAction).GetName() == "locked" {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "locked", nil)
		}
		return false, nil, nil
	})
	kube.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{Username: "system:serviceaccount:metalambda-system:metalambda-gateway"}}}, nil
	})
	for _, tt := range []struct {
		name string
		src  envSources
		want string
	}{
		{"missing", envSources{EnvFrom: []fnv1.EnvFromSource{{SecretRef: &fnv1.EnvSourceRef{Name: "gone"}}}},
			`function ns/f: spec.envFrom[0].secretRef: secret "gone" not found in namespace ns; create it, or mark the reference optional: true`},
		{"forbidden", envSources{EnvValueFrom: map[string]fnv1.EnvVarSource{"P": {SecretKeyRef: &fnv1.KeyRef{Name: "locked", Key: "k"}}}},
			`function ns/f: spec.envValueFrom[P].secretKeyRef: secret "locked": the gateway's account system:serviceaccount:metalambda-system:metalambda-gateway may not get secrets in namespace ns; grant it: ` +
				`kubectl -n ns create role metalambda-gateway-secret-locked --verb=get --resource=secrets --resource-name=locked && ` +
				`kubectl -n ns create rolebinding metalambda-gateway-secret-locked --role=metalambda-gateway-secret-locked --serviceaccount=metalambda-system:metalambda-gateway`},
		{"missing key", envSources{EnvValueFrom: map[string]fnv1.EnvVarSource{"P": {SecretKeyRef: &fnv1.KeyRef{Name: "db", Key: "user"}}}},
			`function ns/f: spec.envValueFrom[P].secretKeyRef: secret "db" has no key "user"; add it, or mark the reference optional: true`},
		{"missing config map", envSources{EnvValueFrom: map[string]fnv1.EnvVarSource{"P": {ConfigMapKeyRef: &fnv1.KeyRef{Name: "settings", Key: "k"}}}},
			`function ns/f: spec.envValueFrom[P].configMapKeyRef: configmap "settings" not found in namespace ns`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.resolve(context.Background(), "ns/f", "ns", &tt.src)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v\nwant it to contain %s", err, tt.want)
			}
			if !errors.Is(err, ErrEnvSourceUnavailable) {
				t.Errorf("error %v is not ErrEnvSourceUnavailable", err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error shows a value: %v", err)
			}
		})
	}
}

func TestGrantCommandForAUser(t *testing.T) {
	got := grantCommand("dev", kindConfigMap, "settings", "alice")
	want := "kubectl -n dev create role metalambda-gateway-configmap-settings --verb=get --resource=configmaps --resource-name=settings && kubectl -n dev create rolebinding metalambda-gateway-configmap-settings --role=metalambda-gateway-configmap-settings --user=alice"
	if got != want {
		t.Errorf("grantCommand = %s\nwant %s", got, want)
	}
}

// An API server that does not answer holds neither a call's env nor the gateway's
// identity past the read timeout.
func TestEnvCacheReadsTimeOut(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer hung.Close()
	defer close(release)
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: hung.URL})
	if err != nil {
		t.Fatal(err)
	}
	c := newEnvCache(kube, 10*time.Second, 2*time.Second, 16)
	c.readTimeout = 50 * time.Millisecond
	done := make(chan struct{})
	var getErr error
	var who string
	go func() {
		defer close(done)
		_, getErr = c.get(context.Background(), "demo", kindSecret, "creds")
		who = c.whoAmI(context.Background())
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the reads did not end")
	}
	if getErr == nil || who != "" {
		t.Errorf("get: %v, whoAmI: %q; want an error and no name", getErr, who)
	}
}
