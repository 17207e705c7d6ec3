# Shared by the benchmark scripts (sourced, from the repository root): the CPU line every table starts
# with, argument checks that fail in one line, and an output directory that holds one run's results only.

BENCH_PY=/usr/bin/python3; [ -x "$BENCH_PY" ] || BENCH_PY=python3

# "cpu: AMD EPYC (AuthenticAMD family 25 model 17, 2 usable cores; avx512f avx512_bf16)": figures from two
# machines of one kind differ, so every table names its CPU.
bench_cpu_line() { "$BENCH_PY" scripts/bench/cpu.py; }

# bench_positive SCRIPT NAME VALUE: a positive integer, or a one-line error and exit 2.
bench_positive() {
  [[ "$3" =~ ^[0-9]+$ ]] && [ "$3" -gt 0 ] || { echo "$1: $2 must be a positive integer, got '$3'" >&2; exit 2; }
}

# bench_fresh_out SCRIPT DIR: DIR emptied for this run's results, or refused. A directory this script family
# made (it holds .poslab-bench) is cleared, so that no result of an earlier run is read as this one's; any
# other non-empty directory is the user's, and is left alone.
bench_fresh_out() {
  if [ -e "$2" ] && [ ! -d "$2" ]; then echo "$1: $2 is a file, not a directory" >&2; exit 2; fi
  if [ -d "$2" ] && [ -n "$(ls -A "$2")" ] && [ ! -e "$2/.poslab-bench" ]; then
    echo "$1: $2 is not empty and was not written by a benchmark script; pick another output directory" >&2
    exit 2
  fi
  rm -rf "$2"
  mkdir -p "$2"
  touch "$2/.poslab-bench"
}
