#!/usr/bin/env python3
"""Scores nanoGPT checkpoints on the whole validation split in non-overlapping windows of 64, every
target once (poslab's `windows` protocol at the training length), beside nanoGPT's own estimate.

    python3 scripts/bench/nanogpt_eval_ckpt.py NANOGPT_DIR OUT_DIR...
"""
import sys

import numpy as np
import torch

sys.path.insert(0, sys.argv[1])
from model import GPT, GPTConfig  # noqa: E402  (nanoGPT's model.py)

torch.set_num_threads(2)
val = np.memmap(f"{sys.argv[1]}/data/shakespeare_char/val.bin", dtype=np.uint16, mode="r").astype(np.int64)
T = 64
n = (len(val) - 1) // T
x = torch.from_numpy(val[:n * T].reshape(n, T))
y = torch.from_numpy(val[1:n * T + 1].reshape(n, T))
for d in sys.argv[2:]:
    ck = torch.load(f"{d}/ckpt.pt", map_location="cpu")
    model = GPT(GPTConfig(**ck["model_args"]))
    model.load_state_dict({k.replace("_orig_mod.", ""): v for k, v in ck["model"].items()})
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, n, 256):
            logits, _ = model(x[i:i + 256], y[i:i + 256])
            total += torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), y[i:i + 256].reshape(-1),
                                                       reduction="sum").item()
    print(f"{d}: after {ck['iter_num']} steps, whole split {total / (n * T):.4f} "
          f"(nanoGPT's own estimate {float(ck['best_val_loss']):.4f})")
