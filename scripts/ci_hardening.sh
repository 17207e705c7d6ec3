#!/usr/bin/env bash
# Hardening pass for CI: an AddressSanitizer + UndefinedBehaviorSanitizer build (clang) runs the
# unit tests, then libFuzzer runs the config parser, checkpoint loader and token-data readers (token-file
# header, meta.json, meta.pkl), the probe options and the plug-in metadata for a bounded time each.
# The fuzz runs use a fixed seed and a fixed number of inputs, so CI replays the same search that
# passed on a developer's machine (a time cap stops it early on a slow machine: a prefix of the same
# search). Explore further locally with POSLAB_FUZZ_SEED=0 (random) and more POSLAB_FUZZ_RUNS.
# Crashes found by fuzzing become regular tests (tests/fuzz/regressions/ are replayed here).
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_SECONDS=${POSLAB_FUZZ_SECONDS:-90}
FUZZ_RUNS=${POSLAB_FUZZ_RUNS:-200000}
FUZZ_SEED=${POSLAB_FUZZ_SEED:-20261123}

need=()
command -v clang++ >/dev/null || need+=(clang)
dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q "install ok installed" || need+=(libclang-rt-14-dev)
if ((${#need[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${need[@]}"
fi

cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DPOSLAB_SANITIZE=ON -DPOSLAB_FUZZ=ON -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link"
cmake --build build-asan --target poslab_unit_tests fuzz_config fuzz_checkpoint fuzz_token_header fuzz_meta_json fuzz_meta_pkl fuzz_probe_options fuzz_plugin_meta

# LibTorch itself is not instrumented: its global state at exit is not ours to leak-check, and its
# protobuf copy trips the ODR check. Our own code is fully checked.
export ASAN_OPTIONS=detect_leaks=0:detect_odr_violation=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
echo "== sanitizers: unit tests"
./build-asan/tests/poslab_unit_tests --gtest_brief=1

echo "== fuzz: regressions"
for target in config checkpoint token_header meta_json meta_pkl probe_options plugin_meta; do
  if compgen -G "tests/fuzz/regressions/$target/*" >/dev/null; then
    ./build-asan/tests/fuzz/fuzz_$target tests/fuzz/regressions/$target/*
  fi
done
# One fuzzer per core at a time (each is single-threaded): the same searches, in about half the time on
# two cores. Each writes its own log; a failure is reported after all have ended, with its log's tail.
fuzz_one() {
  local target=$1 work log max_len=4096
  work=$(mktemp -d)
  cp tests/fuzz/corpus/$target/* "$work/" 2>/dev/null || true
  log=build-asan/fuzz-$target.log
  [ "$target" = checkpoint ] && max_len=65536  # the seed checkpoint is 42 KB
  if ./build-asan/tests/fuzz/fuzz_$target -seed="$FUZZ_SEED" -runs="$FUZZ_RUNS" -max_total_time="$FUZZ_SECONDS" -max_len=$max_len -timeout=20 \
      -artifact_prefix=build-asan/fuzz-$target- "$work" > "$log" 2>&1; then
    echo ok > "build-asan/fuzz-$target.status"
  else
    echo failed > "build-asan/fuzz-$target.status"
  fi
  rm -rf "$work"
}
# The longest first (checkpoint reaches its time cap on a slow machine): the others share the other cores.
targets=(checkpoint plugin_meta config meta_json meta_pkl probe_options token_header)
at_once=$(nproc)
echo "== fuzz: ${targets[*]}; seed $FUZZ_SEED, $FUZZ_RUNS inputs or ${FUZZ_SECONDS}s each, $at_once at a time"
for target in "${targets[@]}"; do
  rm -f "build-asan/fuzz-$target.status"
  while (($(jobs -rp | wc -l) >= at_once)); do wait -n || true; done
  fuzz_one "$target" &
done
wait
failed=0
for target in "${targets[@]}"; do
  if [ "$(cat "build-asan/fuzz-$target.status" 2>/dev/null)" = ok ]; then
    echo "== fuzz: $target: $(grep -E "^Done" "build-asan/fuzz-$target.log" || echo passed)"
  else
    tail -60 "build-asan/fuzz-$target.log" || true
    echo "FUZZ FAILURE in $target: the input is saved as build-asan/fuzz-$target-*; add it to tests/fuzz/regressions/$target/"
    failed=1
  fi
done
((failed == 0)) || exit 1
echo "== hardening: passed"
