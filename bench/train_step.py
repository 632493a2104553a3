"""Training-step time of every positional scheme against the same model with no PE (causal SDPA).

Prints step-time ratios measured in this run and ends with one JSON line.

    python bench/train_step.py [--pes alibi,kerple-log,...|all] [--length 512] [--batch 8] [--steps 5]
    python bench/train_step.py --preset cpu --baseline alibi --pes shaw,tisa,cape-ctx,rope

``--pes all``: every scheme of the registry with its default options (new schemes appear by themselves).
``--preset``: the model size, training length and batch of that training preset (extrap.config.PRESETS).
``--baseline``: the scheme the ratios are taken against (always measured; default nope).
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from extrap import positional
from extrap.config import PRESETS
from extrap.model import GPT, ModelConfig

DEFAULT = "nope,alibi,kerple-log,kerple-power,sandwich,t5,fire,type1,type2,window:64,sinusoidal,rope,xpos"
DEFAULT += ",complex,floater,bipe,cope"  # the survey's added encodings (002); floater needs extrap[floater]


class Trainer:
    """One model and optimizer; ``step()`` times one full training step (forward, backward, AdamW)."""

    def __init__(self, pe: str, length: int, batch: int, d: int, layers: int, heads: int):
        torch.manual_seed(0)
        self.model = GPT(ModelConfig(pe=pe, n_layer=layers, d_model=d, n_head=heads))
        self.opt = torch.optim.AdamW([p for p in self.model.parameters() if p.requires_grad], lr=1e-3)
        self.x = torch.randint(0, 256, (batch, length + 1))

    def step(self) -> float:
        t0 = time.perf_counter()
        logits = self.model(self.x[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), self.x[:, 1:].reshape(-1))
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pes", default=DEFAULT, help="comma-separated specs, or 'all' (the whole registry)")
    ap.add_argument("--preset", choices=sorted(PRESETS), help="model, length and batch of this training preset")
    ap.add_argument("--baseline", default="nope", help="the ratios are step times over this scheme's")
    ap.add_argument("--length", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    a = ap.parse_args()
    if a.preset:
        model, train = PRESETS[a.preset].model, PRESETS[a.preset].train
        a.d_model, a.layers, a.heads = model["d_model"], model["n_layer"], model["n_head"]
        a.length, a.batch = train["train_length"], train["batch_size"]
    pes = [n for n in positional.names() if n != "formula"] if a.pes == "all" else a.pes.split(",")
    pes = [a.baseline] + [pe for pe in pes if pe != a.baseline]
    trainers = {pe: Trainer(pe, a.length, a.batch, a.d_model, a.layers, a.heads) for pe in pes}
    for t in trainers.values():
        t.step()  # warm up allocators and caches
    # Interleave the schemes round by round so that a slow spell of the machine hits them all alike.
    times: dict[str, list[float]] = {pe: [] for pe in pes}
    for _ in range(a.steps):
        for pe, t in trainers.items():
            times[pe].append(t.step())
    res = {pe: sorted(ts)[len(ts) // 2] for pe, ts in times.items()}
    base = res[a.baseline]
    tokens = a.batch * a.length
    col = f"x {a.baseline}"
    print(f"{'pe':<14} {'step s':>8} {'tok/s':>9} {col:>12}")
    for pe, t in res.items():
        print(f"{pe:<14} {t:>8.3f} {tokens / t:>9.0f} {t / base:>12.2f}")
    print(
        json.dumps(
            {
                "bench": "train_step",
                "preset": a.preset,
                "length": a.length,
                "batch": a.batch,
                "threads": torch.get_num_threads(),
                "seconds": res,
                "baseline": a.baseline,
                f"ratio_vs_{a.baseline}": {pe: round(t / base, 3) for pe, t in res.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
