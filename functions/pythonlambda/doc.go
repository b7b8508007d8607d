// Package pythonlambda owns the hooks of the PythonLambda reference operator
// (example.com/v1): Sync, a pure function from the parent, its observed children and
// its related objects to the desired children (a ConfigMap per code revision with the
// Python server, the user's code and requirements, a Service, an Ingress,
// spec.replicas Pods, and during a rollout a surge pod) and the parent's status; and
// Customize, which names the Secrets and ConfigMaps the env reads as related objects.
//
// The engine rolls the pods (RollingRecreate with a Ready check); rollout.go holds
// what the hook adds so that no request is lost, config.go the env sources and the
// config revision that rolls the pods when one changes, requirements.go the pip
// install in an init container.
//
// With spec.scaleToZero, an idle lambda has no pod (scale.go): idleness is judged from
// the last-demand annotation the ingress writes, and the Ingress names the lambda as
// its wake target.
//
// script.py is the Python 3 HTTP server the pods run; it is embedded here and shipped
// in the ConfigMap next to the user's code, so the server is fixed and the code is
// data.
package pythonlambda
