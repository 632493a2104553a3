"""Training-step time of every positional scheme against the same model with no PE (causal SDPA).

Prints step-time ratios measured in this run and ends with one JSON line.

    python bench/train_step.py [--pes alibi,kerple-log,...] [--length 512] [--batch 8] [--steps 5]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

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
    ap.add_argument("--pes", default=DEFAULT)
    ap.add_argument("--length", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    a = ap.parse_args()
    pes = a.pes.split(",")
    if "nope" not in pes:
        pes = ["nope"] + pes
    trainers = {pe: Trainer(pe, a.length, a.batch, a.d_model, a.layers, a.heads) for pe in pes}
    for t in trainers.values():
        t.step()  # warm up allocators and caches
    # Interleave the schemes round by round so that a slow spell of the machine hits them all alike.
    times: dict[str, list[float]] = {pe: [] for pe in pes}
    for _ in range(a.steps):
        for pe, t in trainers.items():
            times[pe].append(t.step())
    res = {pe: sorted(ts)[len(ts) // 2] for pe, ts in times.items()}
    base = res["nope"]
    tokens = a.batch * a.length
    print(f"{'pe':<14} {'step s':>8} {'tok/s':>9} {'x nope':>7}")
    for pe, t in res.items():
        print(f"{pe:<14} {t:>8.3f} {tokens / t:>9.0f} {t / base:>7.2f}")
    print(
        json.dumps(
            {
                "bench": "train_step",
                "length": a.length,
                "batch": a.batch,
                "threads": torch.get_num_threads(),
                "seconds": res,
                "ratio_vs_nope": {pe: round(t / base, 3) for pe, t in res.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
