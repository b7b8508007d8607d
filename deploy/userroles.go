package deploy

import (
	_ "embed"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

var (
	//go:embed kustomize/platform/engine.yaml
	platformEngine []byte
	//go:embed kustomize/platform/gateway.yaml
	platformGateway []byte
)

// UserRoles are the ClusterRoles an install of the platform gives people, as the
// platform's kustomize base (rendered from the chart) holds them: those aggregated
// into the admin, edit and view roles of every namespace (reading the controllers,
// writing namespaced controllers) and the metalambda-function-* roles a namespace's
// admin binds (registering and calling Functions). The local platform, which runs
// the engine and the gateway in its own process, installs them so that a namespace
// owner there has the rights an install gives.
func UserRoles() ([]*unstructured.Unstructured, error) {
	var roles []*unstructured.Unstructured
	for _, data := range [][]byte{platformEngine, platformGateway} {
		objs, err := Decode(data)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if o.GetKind() == "ClusterRole" && forPeople(o) {
				roles = append(roles, o)
			}
		}
	}
	return roles, nil
}

func forPeople(role *unstructured.Unstructured) bool {
	if strings.HasPrefix(role.GetName(), "metalambda-function-") {
		return true
	}
	labels := role.GetLabels()
	for _, to := range []string{"admin", "edit", "view"} {
		if labels["rbac.authorization.k8s.io/aggregate-to-"+to] == "true" {
			return true
		}
	}
	return false
}
