"""bench/gpu.py: its dry run exercises every part at tiny sizes on the CPU and ends with the JSON line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def _bench(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(ROOT / "bench" / "gpu.py"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


def test_the_dry_run_measures_every_part_and_ends_with_one_json_line(tmp_path):
    gpu = _module()
    out = _bench("--dry-run", "--out", str(tmp_path / "gpu.json"))
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert json.loads((tmp_path / "gpu.json").read_text()) == res
    assert {"bench", "device", "device_name", "torch", "dry_run", "parts", "train", "eval", "attention"} <= set(res)
    assert res["bench"] == "gpu" and res["dry_run"] is True and res["device"] == "cpu"
    assert res["parts"] == ["flex", "hf", "train", "eval", "dtype", "attention"]
    for preset in ("smoke", "cpu", "paper"):
        row = res["train"][preset]
        assert {"tokens_per_s", "step_ms", "first_step_s", "tokens_per_step", "steps_timed"} <= set(row), row
        assert row["tokens_per_s"] > 0
    ev = res["eval"]
    assert {"model", "window", "tokens", "seconds", "tokens_per_s", "ppl"} <= set(ev), ev
    assert ev["tokens"] == 4096 and ev["window"] == 64 and ev["tokens_per_s"] > 0
    att = res["attention"]
    assert {"heads", "head_dim", "dtype", "lengths", "ratio_vs_sdpa", "sdpa_ms", "errors"} <= set(att)
    for pe in ("alibi", "type1", "kerple-log", "t5"):
        assert all(att["ratio_vs_sdpa"][f"{pe}@{L}"] > 0 for L in att["lengths"]), pe
    assert "alibi/flex" in att["errors"]  # not compiled on a CPU in the dry run: said, not silently left out
    dt = res["dtype"]  # the same tokens in both dtypes: close, and the difference is what the JSON says
    assert dt["rel_diff"] == pytest.approx(abs(dt["ppl_bfloat16"] / dt["ppl_float32"] - 1), abs=2e-6)
    assert 0 < dt["rel_diff"] < 1e-2
    fx = res["flex"]  # every scheme's generated score_mod ran (forward; the CPU has no FlexAttention backward)
    assert set(fx["fwd"]) == {f"{s}@{L}" for s in fx["schemes"] for L in fx["lengths"]}
    assert all(r > 0 for r in fx["fwd"].values()) and fx["fwd_bwd"] == {}
    assert all("no backward on a CPU" in e for e in fx["errors"].values())
    hf = res["hf"]  # the reference, plain, and every method timed on one tiny Llama, one after another
    runs = {k.split("@")[0] for k in hf["tokens_per_s"]}
    assert runs == {"transformers", "plain", *gpu.METHODS}, hf["errors"]
    assert hf["ratio"][f"plain@{hf['lengths'][0]}"] == 1.0
    assert gpu.readme_tables(res).count("\n|") >= 2 + len(runs)  # the flex and hf tables render from it


def test_parts_choose_what_runs():
    out = _bench("--dry-run", "--parts", "attention")
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["parts"] == ["attention"] and res["train"] is None and res["eval"] is None


@pytest.mark.parametrize("args", [["--parts", "attention,bogus"], ["--quick", "--dry-run"]])
def test_unknown_parts_and_two_sizes_are_refused(args):
    out = _bench(*args)
    assert out.returncode == 2 and out.stdout == "" and "error:" in out.stderr, out.stderr


def _module():
    if str(ROOT / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench"))
    import gpu

    return gpu


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_without_cuda_the_gpu_run_stops_in_one_line():
    out = _bench("--parts", "attention")
    assert out.returncode == 2 and out.stdout == "" and out.stderr.count("\n") == 1, out.stderr


def test_the_readme_gpu_row_is_rendered_from_the_committed_result():
    gpu = _module()
    for result in sorted((ROOT / "docs" / "bench").glob("gpu_*.json")):
        res = json.loads(result.read_text())
        readme = (ROOT / "README.md").read_text()
        row = gpu.readme_row(res)
        assert row in readme, f"README's GPU table differs from {result.name}: {row}"
        assert gpu.readme_tables(res) in readme, f"README's GPU tables differ from {result.name}"
