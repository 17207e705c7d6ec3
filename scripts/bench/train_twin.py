#!/usr/bin/env python3
"""nanoGPT-style PyTorch training twin of `poslab train`, for benchmarks.

    /usr/bin/python3 scripts/bench/train_twin.py --config CONFIG.json [--set key=value ...] \
        --steps N --warmup W --threads T --precision fp32|bf16 --json OUT.json

Same model (scripts/reference/poslab_ref.py), same data (poslab_data.py: the SplitMix64 stream,
so the same seed gives the same batches), same initial weights (same torch.manual_seed and
construction order), same optimizer setup (AdamW, decay only on >=2-dim non-embedding params),
learning-rate schedule (src/train/schedule.h) and gradient clipping as poslab; the loop is the
plain nanoGPT loop (on the CPU, or the GPU with --device cuda): forward (under torch.autocast for bf16), zero_grad,
backward, clip, step.

As `poslab bench`: W untimed warm-up steps (default 10), then N timed steps (default 50); a
step's time covers forward, backward, clip and optimizer step, not making the batch (Python's
batch generation would otherwise be charged to PyTorch), and not reading the loss. The LR follows
the config's schedule (train.max_iters, warmup_iters, ...) over the W+N steps. At the end,
val_loss is the mean over train.eval_iters validation batches drawn, as poslab does, from their
own Rng(seed ^ 0x5EEDFACE). With fp32, W+N = train.max_iters and train.log_interval=1, the
losses (--losses) equal those in poslab's metrics.jsonl: same data, init, and LibTorch kernels.

Threads: --threads T > 0 calls torch.set_num_threads(T); 0 leaves PyTorch's default (poslab's 0
means "all cores" instead). The JSON reports the thread count actually used. poslab's training
commands run with OMP_WAIT_POLICY=ACTIVE unless it is set; this script leaves the environment as it is
(nanoGPT's default) and reports it: run `OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 ...` to match.
"""
import argparse
import json
import math
import os
import platform
import resource
import signal
import sys
import time

# Ctrl-C ends the benchmark as it ends poslab's: at once, nothing written, no traceback (one raised inside
# torch's import comes out as a RuntimeError), and the shell that ran it sees a death by SIGINT.
signal.signal(signal.SIGINT, signal.SIG_DFL)

try:
    import torch
except ImportError:
    print("SKIP: python3-torch is not installed")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import poslab_data  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu import cpu_info  # noqa: E402
from poslab_ref import GPT  # noqa: E402


def learning_rate_at(t, step):
    """src/train/schedule.h: linear warmup, cosine decay to min_lr at lr_decay_iters (or max_iters)."""
    if step < t["warmup_iters"]:
        return t["learning_rate"] * (step + 1) / (t["warmup_iters"] + 1)
    decay_iters = t["lr_decay_iters"] if t["lr_decay_iters"] > 0 else t["max_iters"]
    if step >= decay_iters:
        return t["min_lr"]
    progress = (step - t["warmup_iters"]) / max(1, decay_iters - t["warmup_iters"])
    coeff = 0.5 * (1.0 + math.cos(math.pi * progress))
    return t["min_lr"] + coeff * (t["learning_rate"] - t["min_lr"])


def cpu_has_bf16():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return "avx512_bf16" in line or "amx_bf16" in line
    except OSError:
        pass
    return False


def make_optimizer(model, t):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if model.decays(name, p) else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": t["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=t["learning_rate"], betas=(t["beta1"], t["beta2"]))


DEVICE = "cpu"  # --device


def autocast(bf16):
    if bf16:
        return torch.autocast(device_type=DEVICE, dtype=torch.bfloat16)
    return torch.autocast(device_type=DEVICE, enabled=False)


def estimate_val_loss(model, corpus, config, bf16):
    t = config["train"]
    model.eval()
    rng = poslab_data.Rng(poslab_data.val_seed(config))
    total = 0.0
    with torch.no_grad():
        for _ in range(t["eval_iters"]):
            x, y = corpus.batch("val", t["batch_size"], rng)
            x, y = x.to(DEVICE), y.to(DEVICE)
            with autocast(bf16):
                logits = model(x)
            total += GPT.loss(logits, y).item()
    model.train()
    return total / t["eval_iters"]


def percentile(values, q):
    """Nearest rank, as poslab bench: v[min(n-1, floor(q*(n-1) + 0.5))]."""
    s = sorted(values)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))] if s else float("nan")


def main():
    ap = argparse.ArgumentParser(description="nanoGPT-style PyTorch twin of `poslab train` (benchmarks)")
    ap.add_argument("--config", "-c", required=True)
    ap.add_argument("--set", "-s", dest="sets", action="append", default=[], help="key.path=value (repeatable)")
    ap.add_argument("--steps", type=int, default=50, help="timed training steps (default 50)")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps first (default 10)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads; 0 = PyTorch's default "
                    "(default: train.threads)")
    ap.add_argument("--precision", choices=["fp32", "bf16", "auto"], default=None,
                    help="default: train.precision, auto resolved as poslab does")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where the model trains (default cpu)")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--losses", action="store_true", help="also write every step's train loss to the JSON "
                    "(to compare with poslab's metrics.jsonl at train.log_interval=1)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (PyTorch 2.x; TorchInductor "
                    "generates C++ for the CPU; the warm-up steps absorb the compilation)")
    ap.add_argument("--log-interval", type=int, default=None, help="print the loss every this many steps "
                    "(default: about ten lines)")
    args = ap.parse_args()

    global DEVICE
    DEVICE = args.device
    if DEVICE == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: torch %s sees no CUDA device" % torch.__version__)
    config = poslab_data.load_config(args.config, args.sets)
    t = config["train"]
    if config["model"]["dropout"] > 0:
        print("note: dropout > 0; dropout masks come from torch's RNG and will not match poslab's", file=sys.stderr)
    warmup = args.warmup
    steps = warmup + args.steps  # in all
    if args.steps < 1 or warmup < 0:
        ap.error("--steps must be positive and --warmup >= 0")
    if args.json:  # before the training, not after it
        parent = os.path.dirname(os.path.abspath(args.json))
        if os.path.isdir(args.json) or not os.path.isdir(parent) or not os.access(parent, os.W_OK):
            ap.error("--json %s: cannot be written (a directory, or its directory is missing or read-only)" % args.json)

    threads = args.threads if args.threads is not None else t["threads"]
    if threads > 0:
        torch.set_num_threads(threads)
    precision = args.precision or t["precision"]
    if precision == "auto":
        precision = "bf16" if DEVICE == "cuda" or cpu_has_bf16() else "fp32"
    bf16 = precision == "bf16"
    if DEVICE == "cuda":  # poslab's CUDA settings (src/util/runtime.cpp)
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    elif bf16 and not cpu_has_bf16():
        print("warning: this CPU has no AVX512_BF16/AMX; bf16 runs emulated (poslab refuses it)", file=sys.stderr)

    corpus = poslab_data.make_corpus(config)
    torch.manual_seed(config["seed"])
    model = GPT(config, vocab_size=corpus.vocab_size).to(DEVICE)
    model.train()
    optimizer = make_optimizer(model, t)  # on the module's own parameters, which compile() shares
    forward = model
    if args.compile:
        if not hasattr(torch, "compile"):
            print(f"--compile needs PyTorch 2.x; this is {torch.__version__}", file=sys.stderr)
            return 2
        forward = torch.compile(model)
    rng = poslab_data.Rng(config["seed"])

    log_every = args.log_interval or max(1, steps // 10)
    m = config["model"]
    print(f"twin: {model.num_params()} params, {m['pos_encoding']['kind']} encoding, "
          f"{m['n_layer']}x{m['n_embd']} h{m['n_head']}, batch {t['batch_size']}, {precision}, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}; {warmup} warm-up + {args.steps} timed steps",
          flush=True)

    step_ms, timed_tokens, timed_s, losses = [], 0, 0.0, []
    first_loss = last_loss = float("nan")
    for step in range(steps):
        lr = learning_rate_at(t, step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        x, y = corpus.batch("train", t["batch_size"], rng)
        x, y = x.to(DEVICE), y.to(DEVICE)
        if DEVICE == "cuda":  # the batch's copy is not the step's
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with autocast(bf16):
            logits = forward(x)
            loss = GPT.loss(logits, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if t["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), t["grad_clip"])
        optimizer.step()
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        last_loss = loss.item()
        losses.append(last_loss)
        if step == 0:
            first_loss = last_loss
        if not math.isfinite(last_loss):
            print(f"training loss is {last_loss} at step {step}", file=sys.stderr)
            return 1
        if step >= warmup:
            step_ms.append(dt * 1000.0)
            timed_tokens += x.numel()
            timed_s += dt
        if step % log_every == 0 or step == steps - 1:
            print(f"step {step:>6}/{steps} | train {last_loss:.4f} | lr {lr:.2e} | {dt * 1000:.1f} ms", flush=True)

    val_loss = estimate_val_loss(model, corpus, config, bf16)
    result = {
        "impl": "pytorch-twin-compiled" if args.compile else "pytorch-twin",
        "compiled": args.compile,
        "tokens_per_s": timed_tokens / timed_s if timed_s > 0 else 0.0,
        "train_tokens_per_s": timed_tokens / timed_s if timed_s > 0 else 0.0,  # poslab bench's name
        "ms_per_step_median": percentile(step_ms, 0.5),
        "ms_per_step_p90": percentile(step_ms, 0.9),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,  # Linux: KiB
        "first_train_loss": first_loss,
        "final_train_loss": last_loss,
        "val_loss": val_loss,
        "steps": args.steps,
        "warmup": warmup,
        "device": DEVICE,
        "threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"),
        "precision": precision,
        "params": model.num_params(),
        "kind": m["pos_encoding"]["kind"],
        "batch_size": t["batch_size"],
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu": cpu_info(),  # as poslab bench records it
    }
    if args.losses:
        result["train_losses"] = losses
    if args.json:  # whole or not at all: a temp file renamed over it
        tmp = "%s.tmp.%d" % (args.json, os.getpid())
        with open(tmp, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
        os.replace(tmp, args.json)
    print(f"twin{' (compiled)' if args.compile else ''} {result['kind']} {precision} x{result['threads']}: {result['tokens_per_s']:.0f} tok/s, "
          f"{result['ms_per_step_median']:.2f} ms/step median (p90 {result['ms_per_step_p90']:.2f}), "
          f"peak RSS {result['peak_rss_mb']:.0f} MB, train {first_loss:.4f} -> {last_loss:.4f}, "
          f"val {val_loss:.4f}" + (f"; wrote {args.json}" if args.json else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
