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
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py tests/test_device_flag.py 2>&1 | tee "$OUT/tests.log" | tail -25
timeout 360 python3 bench/gpu.py --quick --out "$OUT/gpu_${card}.json" 2>&1 | tee "$OUT/bench.log" | tail -60
