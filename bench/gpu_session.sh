#!/usr/bin/env bash
# One lent-GPU session's checks, in one call (device time is 15 minutes a session, a command at most 10):
# the CUDA tests first (correctness before speed), then bench/gpu.py --quick; everything lands in $OUT.
#   run: bash bench/gpu_session.sh            (on the device machine, from the repository root)
set -uo pipefail
OUT=${OUT:-/tmp/extrap-gpu}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src:${PYTHONPATH:-} PYTHONUNBUFFERED=1
card=$(python3 -c "import torch; print(torch.cuda.get_device_name(0).split()[1].lower())" 2>/dev/null || echo gpu)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/card.txt"
# SIGINT, not SIGTERM: pytest then stops like a Ctrl-C and still prints what passed and failed so far;
# 8 workers compile FlexAttention kernels in parallel (16 cores), one GPU shared (pytest-xdist, where installed)
workers=$(python3 -c "import xdist" 2>/dev/null && echo "-n 8")
timeout -s INT 250 python3 -m pytest -q $workers -m gpu -p no:cacheprovider -rfE tests/test_gpu.py tests/test_device_flag.py \
  --junitxml "$OUT/tests.xml" 2>&1 | tee "$OUT/tests.log" | tail -30
# the bench writes its JSON after every part (the goals first), so a cut-short run keeps what it measured
timeout -s INT 300 python3 bench/gpu.py --quick --out "$OUT/gpu_${card}.json" 2>&1 | tee "$OUT/bench.log" | tail -60
