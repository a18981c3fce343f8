#!/usr/bin/env bash
# Compiles what .ci/run's later steps build, ahead of them and at the lowest CPU priority, so that
# on a machine whose caches are cold the compiling runs while the earlier steps' tests leave a
# core idle (they wait on API servers much of the time) instead of after them. Warm, every stage
# finds its packages in the Go build cache and only links. docs/development.md, "CI time".
#
# Stages, in the order CI needs them:
#   race     the -race test binaries of ./controlplane/... (make test's last command)
#   release  every release binary for every platform it ships on (make test-release)
#   olm      real OLM, built once per machine by $OLM_TOOLS/build.sh (make test-olm)
#   fuzz     each fuzz target's instrumented test binary (make test-reliability)
#
#   hack/prebuild.sh run          every stage, one after another (make prebuild; .ci/run starts
#                                 it in the background under nice -n 19)
#   hack/prebuild.sh wait STAGE   until STAGE has ended, if a run was started; prints how long
#
# Each stage ends with bin/prebuild/STAGE.done or STAGE.failed beside STAGE.log. A failed stage
# fails nothing: the step that needs it builds the same packages and reports the error itself.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=bin/prebuild
stages=(race release olm fuzz)

run() {
  rm -rf "$dir" && mkdir -p "$dir"
  scratch=$(mktemp -d) # global: the EXIT trap runs after run returns
  trap 'rm -rf "$scratch"' EXIT
  echo $$ > "$dir/started"
  for stage in "${stages[@]}"; do
    local start=$SECONDS
    if "stage_$stage" "$scratch" > "$dir/$stage.log" 2>&1; then
      echo "$((SECONDS - start))" > "$dir/$stage.done"
    else
      echo "$((SECONDS - start))" > "$dir/$stage.failed"
    fi
  done
}

stage_race() { CGO_ENABLED=1 go test -race -c -o "$1/race/" ./controlplane/...; }
stage_release() { go run ./hack/release compile; }
stage_olm() { "${OLM_TOOLS:?set by make prebuild}/build.sh"; }
stage_fuzz() {
  local t
  for t in ${FUZZ_TARGETS:?set by make prebuild}; do
    go test -c -fuzz "^${t##*:}\$" -o "$1/fuzz.test" "./${t%%:*}/" || return 1
  done
}

wait_for() {
  local stage=$1 start=$SECONDS
  [[ " ${stages[*]} " == *" $stage "* ]] || { echo "hack/prebuild.sh: no stage $stage (${stages[*]})" >&2; exit 2; }
  [[ -e "$dir/started" ]] || return 0
  until [[ -e "$dir/$stage.done" || -e "$dir/$stage.failed" ]]; do
    # The run's pid, as long as it is still this script (a pid is reused once it ends).
    if ! grep -qs prebuild.sh "/proc/$(cat "$dir/started")/cmdline"; then
      echo "prebuild: the background build ended before its $stage stage; the step builds it"
      return 0
    fi
    sleep 2
  done
  local ended=$dir/$stage.done result=done
  [[ -e "$ended" ]] || { ended=$dir/$stage.failed; result="failed (the step builds it again; $dir/$stage.log)"; }
  echo "prebuild: $stage $result: $(cat "$ended")s in the background, waited $((SECONDS - start))s for it"
}

case "${1:-}" in
  run) run ;;
  wait) wait_for "${2:?wait STAGE}" ;;
  *) echo "usage: hack/prebuild.sh run | wait STAGE" >&2; exit 2 ;;
esac
