#!/usr/bin/env bash
# make test-reliability: inject faults into the product (test/reliability), rerun the suites that
# measure the other reliability figures (leader takeover and secret search in test/e2e, /readyz,
# tampering), fuzz every target, then print the report table (docs/reliability.md explains each
# figure). Every suite runs even when an earlier one failed; the exit status is non-zero if any did.
#
#   LONG=1    the long variant: 1000 proxies and 20 kills, FUZZTIME 2m per target
#   SEED=N    the crash-injection kill schedule (default: from the clock; the report names it)
#   FUZZTIME  time per fuzz target (default 5s; 2m with LONG=1)
set -uo pipefail
cd "$(dirname "$0")/.."
out=bin/reliability
mkdir -p "$out"
report="$PWD/$out/report.jsonl"
rm -f "$report"
export NEXO_RELIABILITY_REPORT="$report" NEXO_TEST_BIN="$PWD/bin"

proxies=200 kills=10 fuzztime=${FUZZTIME:-5s}
if [ -n "${LONG:-}" ]; then proxies=1000 kills=20 fuzztime=${FUZZTIME:-2m}; fi
failed=()
suite() { # name, command...
  local name=$1; shift
  printf '\n==> %s\n' "$name"
  "$@" 2>&1 | tee "$out/$name.log" | grep --line-buffered -E '^(--- |    .*figure:|ok |FAIL|panic)'
  local rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then
    tail -40 "$out/$name.log"
    failed+=("$name (log: $out/$name.log)")
  fi
}

suite faults go test -count=1 -v -timeout 75m ./test/reliability/ -args -proxies="$proxies" -kills="$kills" -seed="${SEED:-0}"
suite e2e go test -count=1 -v -timeout 30m -run '^TestHostedPathEndToEnd$' ./test/e2e/
suite readyz go test -count=1 -v -run '^TestReadyzIsHonest$' ./test/security/
suite tampering go test -count=1 -v -run '^TestEveryFieldIsCovered$' ./contract/signature/

# fuzz PKG NAME LOG: one run; a bare "context deadline exceeded" at the -fuzztime boundary with
# no failing input written is Go's coordinator race (golang/go#75804, fixed in Go 1.27, not in
# the 1.26 this builds with), not a finding: that run is repeated once.
fuzz() {
  go test "./$1/" -run '^$' -fuzz "^$2\$" -fuzztime "$fuzztime" > "$3" 2>&1 && return 0
  if grep -q 'context deadline exceeded' "$3" && ! grep -q 'Failing input written' "$3"; then
    echo "(the Go fuzzing deadline race, golang/go#75804; running $2 again)"
    go test "./$1/" -run '^$' -fuzz "^$2\$" -fuzztime "$fuzztime" > "$3" 2>&1 && return 0
  fi
  return 1
}
for t in ${FUZZ_TARGETS:?set by make test-reliability}; do
  pkg=${t%%:*} name=${t##*:}
  printf '\n==> fuzz %s %s (%s)\n' "$pkg" "$name" "$fuzztime"
  log="$out/fuzz-${pkg//\//-}-$name.log"
  if fuzz "$pkg" "$name" "$log"; then
    execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
    go run ./hack/reliability-report add "$report" fuzz "$pkg $name ($fuzztime)" "${execs:-0} executions, 0 failures"
    tail -1 "$log"
  else
    tail -20 "$log"
    go run ./hack/reliability-report add "$report" fuzz "$pkg $name ($fuzztime)" "FAILED (a failing input is kept in $pkg/testdata/fuzz/$name)"
    failed+=("fuzz $pkg $name (log: $log)")
  fi
done

printf '\n==> Reliability report (%s)\n\n' "$(date -u +%Y-%m-%dT%H:%MZ)"
go run ./hack/reliability-report table "$report" | tee "$out/report.md"
if [ ${#failed[@]} -gt 0 ]; then
  printf '\nFAILED:\n'; printf '  %s\n' "${failed[@]}"
  exit 1
fi
