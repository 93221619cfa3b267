#!/usr/bin/env bash
# GPU checks in one run on a CUDA machine (the device tool's H200): the CUDA tests of the
# library and the dashboard, then the attention benchmark on CUDA. Streamlit and its missing
# dependencies travel as wheels in .whl/ (see README, "GPU checks"); logs go to $OUT when set.
set -uo pipefail
cd "$(dirname "$0")/.."
LOG=${OUT:-/tmp}
export PYTHONUNBUFFERED=1 STREAMLIT_BROWSER_GATHER_USAGE_STATS=false
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:.
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, torch.cuda.get_device_name())"

echo "== CUDA tests (library and dashboard)"
timeout 240 python3 -m pytest -q -p no:cacheprovider -m gpu \
  tests/core/test_gpu.py tests/dashboard/test_dashboard_gpu.py 2>&1 | tee "$LOG/gpu_tests.log" | tail -15

echo "== benchmark on CUDA"
timeout 240 python3 -m bench --device cuda 2>&1 | tee "$LOG/bench_cuda.log"
