#!/usr/bin/env bash
# Raises each module that a tools module under hack/tools shares with the product to the
# product's version, where the product's is the newer, then tidies the tools module. With
# -trimpath (the Makefile's GOFLAGS) the Go build cache keys a dependency by module, version and
# what it imports, so a dependency at the same version in both builds is compiled once: the
# Kubernetes binaries and the Helm CLI then share client-go, the API types, the API server
# libraries and Helm's own packages with the product's tests (docs/development.md, "CI time").
# Run it after changing the product's dependencies (make align-tools); a tools module that is not
# aligned still builds, only slower on a cold machine.
#
# The tools modules require Kubernetes' staging modules at v0.0.0 (as k8s.io/kubernetes does) and
# replace them with v0.37.2; the cache keys a replaced module by its required version, so they are
# required at v0.37.2 here, which the same replace lines still satisfy.
set -euo pipefail
cd "$(dirname "$0")/.."
groups=${*:-kubernetes helm}

# newer A B: B is the newer semantic version. sort -V orders versions as semver does except a
# pre-release (or pseudo-version) against its own release, which it puts after it.
newer() {
  [[ "$1" == "$2"-* ]] && return 0
  [[ "$2" == "$1"-* ]] && return 1
  [[ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -1)" == "$2" ]]
}

# Only modules that give packages to both builds count: raising one that is merely in a module
# graph would pull its own requirements in, past the product's versions.
provided='{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}'
declare -A product
while read -r path version; do
  product[$path]=$version
done < <(go list -deps -test -f "$provided" ./... | sort -u)

for group in $groups; do
  dir=hack/tools/$group
  raised=()
  while read -r path version; do
    want=${product[$path]:-}
    [[ -n "$want" && "$want" != "$version" ]] || continue
    newer "$version" "$want" || continue
    raised+=("-require=$path@$want")
  done < <(cd "$dir" && go list -deps -f "$provided" tool | sort -u)
  if [[ ${#raised[@]} -eq 0 ]]; then
    echo "hack/align-tools: $group shares every module at the product's version"
    continue
  fi
  (cd "$dir" && go mod edit "${raised[@]}" && go mod tidy)
  echo "hack/align-tools: $group: raised ${#raised[@]} modules to the product's versions"
done
