#!/usr/bin/env bash
# Builds the binaries of the local test cluster from the Go module proxy into bin/:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok
# (+ kwok's Stage manifests). Each build is pinned by its tools module under hack/tools/<group>
# and skipped when bin/ already holds a binary stamped with the same go.mod/go.sum digest.
# When KUBEBUILDER_ASSETS is set (a user with setup-envtest), etcd and kube-apiserver come from
# there and are not built.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
mkdir -p "$bin/.stamps"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

# build GROUP NAME PACKAGE: go build PACKAGE from hack/tools/GROUP into bin/NAME unless stamped.
build() {
  local group=$1 name=$2 pkg=$3 dir="$root/hack/tools/$1"
  local stamp; stamp=$(cat "$dir/go.mod" "$dir/go.sum" | sha256sum | cut -c1-16)
  if [[ -x "$bin/$name" && "$(cat "$bin/.stamps/$name" 2>/dev/null)" == "$stamp" ]]; then
    echo "hack/build-tools: $name is up to date"; return
  fi
  echo "hack/build-tools: building $name ($group tools module; the first build takes minutes)"
  local start=$SECONDS
  (cd "$dir" && go build -trimpath -ldflags=-s -o "$bin/$name" "$pkg")
  echo "$stamp" > "$bin/.stamps/$name"
  echo "hack/build-tools: built $name in $((SECONDS - start))s"
}

if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
  echo "hack/build-tools: KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS provides etcd and kube-apiserver"
else
  build etcd etcd .
  build kubernetes kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
fi
if [[ "${1:-}" != "--envtest-only" ]]; then
  build kubernetes kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
  build kubernetes kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
  build kubernetes kubectl k8s.io/kubernetes/cmd/kubectl
  build kwok kwok sigs.k8s.io/kwok/cmd/kwok
  # kwok refuses to start without Stage objects; the module ships them as YAML.
  kwokdir=$(cd "$root/hack/tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
  mkdir -p "$bin/kwok-stages"
  for s in node/fast node/heartbeat pod/fast; do
    cp "$kwokdir/kustomize/stage/$s/"*.yaml "$bin/kwok-stages/" 2>/dev/null || true
  done
  rm -f "$bin/kwok-stages/kustomization.yaml"
  chmod u+w "$bin/kwok-stages/"*.yaml
fi
