#!/usr/bin/env bash
# End-to-end check of the ImmortalContainer operator against the cluster kubectl points
# at (the engine and the gateway must be running).
set -euo pipefail
cd "$(dirname "$0")"
pod=example-immortal-container-immortalpod
cleanup() { kubectl delete -f sample.yaml --ignore-not-found --wait=false >/dev/null; }
trap cleanup EXIT

kubectl apply -f ../../crds/ >/dev/null
kubectl apply -f operator.yaml
kubectl apply -f sample.yaml

wait_for() { # wait_for DESCRIPTION COMMAND...
  local what=$1; shift
  for _ in $(seq 60); do "$@" >/dev/null 2>&1 && return 0; sleep 2; done
  echo "FAIL: $what" >&2; exit 1
}
current() { [[ $(kubectl get immortalcontainer example-immortal-container -o jsonpath='{.status.currentPod}') == "$pod" ]]; }
wait_for "status.currentPod names $pod" current
uid=$(kubectl get pod "$pod" -o jsonpath='{.metadata.uid}')
kubectl delete pod "$pod" --wait=false
recreated() { [[ $(kubectl get pod "$pod" -o jsonpath='{.metadata.uid}') != "$uid" ]]; }
wait_for "the deleted pod comes back" recreated
echo "PASS"
