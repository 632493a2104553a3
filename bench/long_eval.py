"""Peak memory and time of one forward pass at L_ex = 32,768 with the cpu-preset model.

Exact attention and the TRF window (``--window auto``) are measured in separate
subprocesses so each peak RSS is its own.  Target: within 8 GB on 2 CPU cores.
Ends with one JSON line.

    python bench/long_eval.py [--run RUN_DIR] [--pe alibi] [--length 32768]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def one(run: str | None, pe: str, L: int, window: str) -> dict:
    import torch

    from extrap.model import GPT, ModelConfig

    if run:
        import extrap

        model = extrap.load(run).model
    else:
        torch.manual_seed(0)
        model = GPT(ModelConfig(pe=pe, n_layer=4, d_model=128, n_head=4)).eval()
    w = None
    if window == "auto":
        from extrap.evaluate import model_trf_window

        w, _ = model_trf_window(model, 1e-6)
    x = torch.randint(0, model.cfg.vocab_size, (1, L))
    t0 = time.perf_counter()
    with torch.no_grad():
        loss = torch.nn.functional.cross_entropy(model(x[:, :-1], window=w).logits[0].float(), x[0, 1:])
    return {
        "pe": model.cfg.pe,
        "length": L,
        "window": w,
        "seconds": time.perf_counter() - t0,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "loss": float(loss),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run")
    ap.add_argument("--pe", default="alibi")
    ap.add_argument("--length", type=int, default=32768)
    ap.add_argument("--one", choices=["none", "auto"])
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.run, a.pe, a.length, a.one)))
        return
    rows = []
    for window in ("none", "auto"):
        cmd = [sys.executable, __file__, "--one", window, "--pe", a.pe, "--length", str(a.length)]
        if a.run:
            cmd += ["--run", a.run]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode:
            rows.append({"window": window, "error": out.stderr.strip().splitlines()[-1]})
        else:
            rows.append(json.loads(out.stdout))
        r = rows[-1]
        print(
            f"L={a.length} window={r.get('window')}: "
            + (f"{r['seconds']:.1f} s, peak RSS {r['peak_rss_gb']:.2f} GB" if "error" not in r else r["error"]),
            flush=True,
        )
    ok = all("error" not in r and r["peak_rss_gb"] < 8 for r in rows)
    print(json.dumps({"bench": "long_eval", "length": a.length, "within_8gb": ok, "rows": rows}))


if __name__ == "__main__":
    main()
