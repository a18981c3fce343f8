#!/usr/bin/env bash
# Builds the binaries of the local test cluster from the Go module proxy into bin/:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok, helm, promtool
# (+ kwok's Stage manifests). Each build is pinned by its tools module under hack/tools/<group>
# and skipped when bin/ already holds a binary stamped with the same go.mod/go.sum digest.
# Built binaries are kept per machine, as OLM's build is, in
# ${NEXO_TOOLS_CACHE:-${XDG_CACHE_HOME:-~/.cache}/nexo-edge/cluster-tools}/<name>-<stamp>: a new
# clone (CI's) copies them from there instead of linking them again.
# When KUBEBUILDER_ASSETS is set (a user with setup-envtest), etcd and kube-apiserver come from
# there and are not built.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
mkdir -p "$bin/.stamps"
cache=${NEXO_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nexo-edge/cluster-tools}
mkdir -p "$cache"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

# The Kubernetes binaries report their real version (Helm's kubeVersion check and nexoctl
# preflight read it); without these flags they say v0.0.0-master.
k8s_version=v1.37.2
k8s_ldflags="-s"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=37 -X $pkg.gitTreeState=clean"
done

# build GROUP NAME PACKAGE [LDFLAGS [TAGS]]: go build PACKAGE from hack/tools/GROUP into bin/NAME
# unless bin/NAME is stamped with the same module digest and flags.
build() {
  local group=$1 name=$2 pkg=$3 ldflags=${4:--s} tags=${5:-} dir="$root/hack/tools/$1"
  local stamp; stamp=$( (cat "$dir/go.mod" "$dir/go.sum"; echo "$ldflags"; [[ -z "$tags" ]] || echo "tags $tags") | sha256sum | cut -c1-16)
  local cached="$cache/$name-$stamp"
  if [[ -x "$bin/$name" && "$(cat "$bin/.stamps/$name" 2>/dev/null)" == "$stamp" ]]; then
    [[ -x "$cached" ]] || { cp "$bin/$name" "$cached.tmp" && mv "$cached.tmp" "$cached"; }
    echo "hack/build-tools: $name is up to date"; return
  fi
  if [[ -x "$cached" ]]; then
    cp "$cached" "$bin/$name.tmp" && mv "$bin/$name.tmp" "$bin/$name"
    echo "$stamp" > "$bin/.stamps/$name"
    echo "hack/build-tools: $name from the machine's cache ($cache)"; return
  fi
  echo "hack/build-tools: building $name ($group tools module; the first build takes minutes)"
  local start=$SECONDS
  (cd "$dir" && go build -trimpath ${tags:+-tags "$tags"} -ldflags="$ldflags" -o "$cached.tmp" "$pkg")
  mv "$cached.tmp" "$cached"
  cp "$cached" "$bin/$name.tmp" && mv "$bin/$name.tmp" "$bin/$name"
  echo "$stamp" > "$bin/.stamps/$name"
  echo "hack/build-tools: built $name in $((SECONDS - start))s (kept in $cache)"
}

if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
  echo "hack/build-tools: KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS provides etcd and kube-apiserver"
else
  build etcd etcd .
  build kubernetes kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$k8s_ldflags"
fi
if [[ "${1:-}" != "--envtest-only" ]]; then
  build kubernetes kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$k8s_ldflags"
  build kubernetes kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$k8s_ldflags"
  build kubernetes kubectl k8s.io/kubernetes/cmd/kubectl "$k8s_ldflags"
  build kwok kwok sigs.k8s.io/kwok/cmd/kwok
  build helm helm helm.sh/helm/v3/cmd/helm
  # promtool only checks and unit-tests rule files: remove_all_sd leaves out Prometheus's service
  # discovery plugins (the AWS, Azure, GCE... SDKs), a third of its packages and of its first build.
  build prometheus promtool github.com/prometheus/prometheus/cmd/promtool -s remove_all_sd
  # kwok refuses to start without Stage objects; the module ships them as YAML.
  kwokdir=$(cd "$root/hack/tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
  mkdir -p "$bin/kwok-stages"
  for s in node/fast node/heartbeat pod/fast; do
    cp "$kwokdir/kustomize/stage/$s/"*.yaml "$bin/kwok-stages/" 2>/dev/null || true
  done
  rm -f "$bin/kwok-stages/kustomization.yaml"
  chmod u+w "$bin/kwok-stages/"*.yaml
fi
