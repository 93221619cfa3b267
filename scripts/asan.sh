#!/usr/bin/env bash
# AddressSanitizer check of the band kernel: builds attention_core/_native/band.c with
# -fsanitize=address into a temporary folder, loads that build as attention_core._band (the
# installed one is not touched) and runs the kernel tests (every instruction set this CPU
# runs, the portable one always) with libasan preloaded. Exits non-zero on a finding.
# Run it after any change to the kernel's indexing. Extra arguments go to pytest; BAND_SRC
# names another copy of band.c to check (default: the repository's).
set -euo pipefail
cd "$(dirname "$0")/.."

cc=${CC:-gcc}
src=${BAND_SRC:-attention_core/_native/band.c}
libasan=$("$cc" -print-file-name=libasan.so)
if [ ! -e "$libasan" ]; then
  echo "asan.sh: $cc has no libasan.so (install gcc's AddressSanitizer runtime)" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

include=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
suffix=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
so="$work/_band$suffix"
"$cc" -shared -fPIC -O1 -g -fno-omit-frame-pointer -std=gnu11 -fsanitize=address \
  -I"$include" "$src" -o "$so"
echo "asan.sh: built $src with -fsanitize=address as $so"

# A pytest plugin that registers the ASan build as attention_core._band before the tests
# import band_kernel, and checks that it is the one in use.
cat >"$work/asan_band.py" <<'PY'
import importlib.util
import os
import sys

_path = os.environ["ASAN_BAND_SO"]
_spec = importlib.util.spec_from_file_location("attention_core._band", _path)
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
sys.modules["attention_core._band"] = _module


def pytest_sessionstart(session):
    from attention_core.variants import band_kernel

    state = band_kernel.status()
    if band_kernel._band is not _module or not state.available:
        raise SystemExit(f"asan.sh: the ASan build is not the one in use: {state}")
    print(f"asan.sh: testing the ASan build, instruction sets {state.isas}", file=sys.stderr)
PY

# ASan writes its reports to files (pytest captures the tests' stderr): asan.<pid>
set +e
ASAN_BAND_SO="$so" PYTHONPATH="$work${PYTHONPATH:+:$PYTHONPATH}" LD_PRELOAD="$libasan" \
  ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:exitcode=99:log_path=$work/asan" \
  python3 -m pytest -q -p no:cacheprovider -p asan_band -rs tests/core/test_band_kernel.py "$@"
status=$?
set -e
if compgen -G "$work/asan.*" >/dev/null; then
  cat "$work"/asan.* >&2
  echo "asan.sh: AddressSanitizer reported a finding (above)" >&2
  exit 1
fi
if [ "$status" -ne 0 ]; then
  echo "asan.sh: the kernel tests failed under AddressSanitizer (exit $status)" >&2
  exit "$status"
fi
echo "asan.sh: no AddressSanitizer finding"
