"""The CPU a benchmark ran on, as `poslab bench` records it (src/util/runtime.cpp, cpu_info): /proc/cpuinfo's
first processor's vendor, family, model and model name, the usable cores, and the flags that choose kernels
(AVX2, FMA, AVX-512, AMX). Figures from two machines of one kind differ: every table and JSON names its CPU.

    python3 scripts/bench/cpu.py          # one line: "cpu: AMD EPYC (AuthenticAMD family 25 model 17, ...)"
    python3 scripts/bench/cpu.py --json   # the fields as JSON
"""

import json
import os
import sys


def cpu_info():
    out = {"vendor": "unknown", "family": "unknown", "model": "unknown", "model_name": "unknown",
           "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(), "flags": []}
    names = {"vendor_id": "vendor", "cpu family": "family", "model": "model", "model name": "model_name"}
    try:
        first = open("/proc/cpuinfo").read().split("\n\n")[0]
    except OSError:
        return out
    for line in first.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key in names:
            out[names[key]] = value
        elif key == "flags":
            out["flags"] = [f for f in value.split() if f in ("avx2", "fma") or f.startswith(("avx512", "amx"))]
    return out


def describe(cpu):
    """One line, as `poslab bench` prints it."""
    flags = [f for f in cpu.get("flags", []) if f == "avx512f" or "bf16" in f or f.startswith("amx")]
    return "cpu: %s (%s family %s model %s, %s usable cores; %s)" % (
        cpu.get("model_name"), cpu.get("vendor"), cpu.get("family"), cpu.get("model"), cpu.get("cores"),
        " ".join(flags) or "no AVX-512")


if __name__ == "__main__":
    info = cpu_info()
    print(json.dumps(info) if sys.argv[1:] == ["--json"] else describe(info))
