// Package pythonlambda owns the sync hook of the PythonLambda reference operator
// (example.com/v1): a pure function from the parent and its observed children to the
// desired children (a ConfigMap with the Python server and the user's code, a
// Service, an Ingress and spec.replicas Pods) and the parent's status. With
// spec.scaleToZero, an idle lambda has no pod (scale.go): idleness is judged from the
// last-demand annotation the ingress writes, and the Ingress names the lambda as its
// wake target.
//
// script.py is the Python 3 HTTP server the pods run; it is embedded here and shipped
// in the ConfigMap next to the user's code, so the server is fixed and the code is
// data.
package pythonlambda
