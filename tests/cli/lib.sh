# Shared helpers for the CLI tests: a temp dir, and an expectation on exit status + message.
set -u
POSLAB=$(realpath "${1:?usage: $0 PATH_TO_POSLAB}")
CLI_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)  # tests/cli, for the Python checkers in py/
WORK=$(mktemp -d)
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"' EXIT  # KEEP_WORK=1 keeps it, to look at after a failure
export OMP_WAIT_POLICY=PASSIVE
# OpenBLAS starts its threads as it loads, and they spin ~0.1 s before sleeping: a CPU-second per ten
# poslab starts, taken from the test running beside this one (cli_errors: 97 -> 71 CPU-seconds). poslab
# still sets the count it wants once it runs matmuls (util/runtime.cpp).
export OPENBLAS_NUM_THREADS=1
passed=0
failed=0

# py_has PYTHON MODULE...: whether PYTHON finds every module, without importing them (importing torch to
# ask takes ~1.2 s; a module that is there but broken fails the check that uses it, loudly).
py_has() {
  local py=$1
  shift
  "$py" -c 'import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in sys.argv[1:]))' "$@" 2>/dev/null
}

# expect_fail STATUS "message fragment" -- command...
expect_fail() {
  local want=$1 fragment=$2
  shift 3
  local out status
  out=$("$@" 2>&1 >/dev/null)
  status=$?
  local lines
  lines=$(printf '%s\n' "$out" | grep -c . || true)
  if [ "$status" -eq "$want" ] && [[ "$out" == *"$fragment"* ]] && [ "$lines" -le 1 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: $* -> status $status (want $want), stderr: $out (want '$fragment' on one line)"
  fi
}

check() {  # check "description" test-expression...
  local what=$1
  shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $what"; fi
}

finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
