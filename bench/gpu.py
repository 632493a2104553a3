"""extrap on a GPU: training, streamed evaluation, fused attention and hf: models at 32k-128k, as ratios.

Six parts (``--parts``, default all), each through extrap's own code paths, on ``--device`` (default cuda):

* ``train`` (bench/gpu_models.py): ``extrap train`` (bf16 autocast, FlexAttention, fused AdamW on a GPU) of
  ALiBi at each preset for ``--warmup`` + ``--steps`` steps; the median logged tokens/s after the warm-up steps
  (which include compiling) and the MFU the run logs beside it.
* ``eval``: a cpu-preset ALiBi run, trained ``--eval-steps`` steps here, scores ``--length`` tokens (default 2^20)
  of the stdlib's held-out stream as ONE sequence with ``--window auto``, streamed through the rolling KV cache
  as ``extrap eval --file ... --window auto`` does (the training split where the held-out text is shorter, and
  ``split`` says so).  Tokens/s of the timed pass, after a 32k-token warm-up.
* ``dtype``: the same run's perplexity on the same tokens in bfloat16 (the GPU default) and in float32, and
  their relative difference (goal <= 0.1%).
* ``attention`` (bench/gpu_kernels.py): the float32 forward of ``attend`` at 8k..64k, blocked and flex,
  against causal SDPA (as evaluation ran before bf16 became the default).
* ``flex``: each bias scheme's generated score_mod in bf16, forward and forward + backward, against causal
  SDPA at 4k..32k (goal <= 1.6x for the elementwise schemes, <= 2.5x for Sandwich), both modes where a scheme
  has two (formula in the kernel, table read), and the number of compiles.
* ``hf`` (bench/gpu_hf.py): a Llama-3.1-8B-shaped model with random weights: prefill through extrap against
  transformers' own forward (goal >= 0.95x), each ``--extend`` method against plain (goal <= 1.6x at 32k),
  peak memory at 128k (goal: all fit in 80 GB).

Prints a table and ends with one JSON line (also written to ``--out`` after every part, so a run stopped early
keeps what it measured).  ``--quick`` keeps every part at fewer sizes and methods (aimed at <= 6 minutes on an
H100); ``--dry-run`` runs every part at tiny sizes on the CPU in seconds.

    PYTHONPATH=src python3 bench/gpu.py [--quick] [--parts flex,hf,train,eval,dtype,attention] [--out gpu.json]
    PYTHONPATH=src python3 bench/gpu.py --dry-run
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from gpu_common import failure
from gpu_hf import METHODS, hf_part
from gpu_kernels import SCHEMES, attention_part, flex_part
from gpu_models import dtype_part, eval_part, train_part
from gpu_report import print_table, readme_row, readme_tables

PARTS = ("flex", "hf", "train", "eval", "dtype", "attention")  # the goals first: a run cut short keeps them
QUICK = dict(  # --quick: every part, fewer sizes (compiles dominate: one per scheme and per method)
    steps=10, warmup=3, length=2**18, eval_steps=100, lengths=[8192, 32768], flex_lengths=[4096, 16384],
    rounds=3, hf_lengths=[32768, 131072], hf_reps=2,
)  # fmt: skip
DRY = dict(  # --dry-run: every part, at sizes a CPU runs in seconds
    length=4096, window="64", eval_steps=2, warmup=1, steps=2, lengths=[256, 512], flex_lengths=[128],
    heads=2, head_dim=16, rounds=1, hf_lengths=[256], hf_reps=1,
)  # fmt: skip

__all__ = ["METHODS", "PARTS", "SCHEMES", "main", "parse", "readme_row", "readme_tables"]


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default=",".join(PARTS), help="comma-separated: " + ",".join(PARTS))
    ap.add_argument("--device", default=None, help="cuda | cuda:N | cpu (default cuda; cpu with --dry-run)")
    ap.add_argument("--dry-run", "--cpu", action="store_true", dest="dry_run", help="every part, tiny, on the CPU")
    ap.add_argument("--quick", action="store_true", help="every part at fewer sizes (about 6 minutes on an H100)")
    ap.add_argument("--out", help="also write the JSON line to this file")
    ap.add_argument("--length", type=int, default=2**20, help="eval: tokens scored as one sequence")
    ap.add_argument("--window", default="auto", help="eval: auto (TRF(1e-6) of the trained bias) or W")
    ap.add_argument("--eval-steps", type=int, default=200, help="eval, dtype: training steps of the cpu-preset run")
    ap.add_argument("--warmup", type=int, default=5, help="train: steps before the timed ones")
    ap.add_argument("--steps", type=int, default=20, help="train: timed steps per preset")
    ap.add_argument("--lengths", default="8192,16384,32768,65536", help="attention: comma-separated L")
    ap.add_argument("--flex-lengths", default="4096,8192,16384,32768", help="flex: comma-separated L")
    ap.add_argument("--hf-lengths", default="32768,131072", help="hf: comma-separated L (the longest: memory)")
    ap.add_argument("--hf-reps", type=int, default=3, help="hf: timed prefills per length below 64k")
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"), help="attention part's dtype")
    ap.add_argument("--rounds", type=int, default=5, help="attention, flex: timing rounds (half beyond 16k)")
    a = ap.parse_args(argv)
    parts = a.parts.split(",")
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        ap.error(f"unknown part {', '.join(unknown)} (parts: {', '.join(PARTS)})")
    if a.quick and a.dry_run:
        ap.error("--quick and --dry-run are two sizes: choose one")
    a.parts = [p for p in PARTS if p in parts]
    for name in ("lengths", "flex_lengths", "hf_lengths"):
        setattr(a, name, [int(x) for x in getattr(a, name).split(",")])
    for key, value in (DRY if a.dry_run else QUICK if a.quick else {}).items():
        setattr(a, key, value)
    return a


def main(argv=None) -> int:
    import torch

    from extrap.devices import resolve_device
    from extrap.errors import ExtrapError

    a = parse(argv)
    try:
        dev = resolve_device(a.device or ("cpu" if a.dry_run else "cuda"))
    except ExtrapError as e:
        print(f"gpu.py: {e}", file=sys.stderr)
        return 2
    res = {"bench": "gpu", "device": str(dev), "torch": torch.__version__, "dry_run": a.dry_run, "parts": a.parts}
    res["quick"] = a.quick
    res["device_name"] = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    res.update({p: None for p in PARTS}, part_seconds={})
    shared: dict = {}  # the eval part's trained run, which the dtype part reuses
    with tempfile.TemporaryDirectory(prefix="extrap-gpu-") as tmp:
        root = Path(tmp)
        for part in a.parts:
            t0 = time.perf_counter()
            try:
                res[part] = {
                    "train": lambda: train_part(root, a, dev),
                    "eval": lambda: eval_part(root, a, dev, shared),
                    "dtype": lambda: dtype_part(root, a, dev, shared),
                    "attention": lambda: attention_part(a, dev),
                    "flex": lambda: flex_part(a, dev),
                    "hf": lambda: hf_part(a, dev),
                }[part]()
            except Exception as e:  # a part that fails is reported; the others still run
                res[part] = {"error": failure(e)}
            res["part_seconds"][part] = round(time.perf_counter() - t0, 1)
            if a.out:
                Path(a.out).write_text(json.dumps(res) + "\n")
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    print_table(res)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
