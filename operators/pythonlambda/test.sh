#!/usr/bin/env bash
# End-to-end check of the PythonLambda operator against the cluster kubectl points at
# (the engine and the gateway must be running). Set INGRESS to the ingress address
# (host:port) to also check the HTTP answer.
set -euo pipefail
cd "$(dirname "$0")"
ns=python-lambda-operator
cleanup() { kubectl delete -f sample.yaml --ignore-not-found --wait=false >/dev/null; }
trap cleanup EXIT

kubectl apply -f ../../crds/ >/dev/null
kubectl apply -f operator.yaml
kubectl apply -f sample.yaml

echo "waiting for the children"
for _ in $(seq 60); do
  pods=$(kubectl get pods -n "$ns" -l controller-uid="$(kubectl get py demo-python-lambda -n "$ns" -o jsonpath='{.metadata.uid}')" --no-headers 2>/dev/null | wc -l)
  [[ $pods == 2 ]] && break
  sleep 2
done
[[ $pods == 2 ]] || { echo "FAIL: want 2 pods, have $pods" >&2; exit 1; }
kubectl get configmaps,services,ingresses,pods -n "$ns"

if [[ -n ${INGRESS:-} ]]; then
  want='Hello Martin! Your name in reverse is nitraM'
  for _ in $(seq 60); do
    got=$(curl -s -H 'Host: example.com' "http://$INGRESS/?name=Martin" || true)
    [[ $got == "$want" ]] && break
    sleep 2
  done
  [[ $got == "$want" ]] || { echo "FAIL: got '$got', want '$want'" >&2; exit 1; }
  echo "curl: $got"
fi
echo "PASS"
