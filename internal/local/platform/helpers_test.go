package platform

import (
	"encoding/json"
	"os/exec"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/kubetest"
)

func mustUnstructured(s string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(s), &u.Object); err != nil {
		panic(err)
	}
	return u
}

func runCmd(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// connect is the kit's Env for the platform's cluster.
func connect(t testing.TB, kubeconfig string) *kubetest.Env {
	t.Helper()
	env, err := kubetest.Connect(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return env
}
