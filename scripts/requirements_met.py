"""Exit 0 when every pinned requirement is installed at its pinned version and this checkout
is the installed ``attention-lab`` (editable, with its C kernel built where a compiler is);
exit 1 and name what is missing otherwise. ``scripts/test.sh`` runs pip only then.

Usage: python3 scripts/requirements_met.py requirements.txt [more.txt ...]
"""

from __future__ import annotations

import importlib.metadata as metadata
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;#]+)")


def pins(path: Path) -> list[tuple[str, str]]:
    """``(name, version)`` of each ``name==version`` line of a requirements file."""
    found = []
    for line in path.read_text("utf-8").splitlines():
        match = PIN.match(line.strip())
        if match:
            found.append((match.group(1), match.group(2)))
    return found


def version_matches(installed: str, pinned: str) -> bool:
    """``2.13.0+cpu`` satisfies ``2.13.0`` (a local build of the same release), as pip says."""
    return installed == pinned or installed.split("+", 1)[0] == pinned


def missing_pins(files: list[Path]) -> list[str]:
    """Every pin of ``files`` not installed at its version."""
    missing = []
    for path in files:
        for name, version in pins(path):
            try:
                installed = metadata.version(name)
            except metadata.PackageNotFoundError:
                missing.append(f"{name}=={version} (not installed)")
                continue
            if not version_matches(installed, version):
                missing.append(f"{name}=={version} (installed {installed})")
    return missing


def this_checkout_installed() -> str | None:
    """Why this checkout is not the installed project, or None when it is."""
    probe = "import attention_core, dashboard; print(attention_core.__file__, dashboard.__file__)"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd="/", capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        return "attention_core is not installed"
    for origin in result.stdout.split():
        if not Path(origin).resolve().is_relative_to(REPO):
            return f"the installed project is another checkout ({origin})"
    has_compiler = shutil.which("cc") or shutil.which("gcc")
    for kernel in ("_band", "_ggml"):
        if has_compiler and not list((REPO / "attention_core").glob(f"{kernel}*.so")):
            return f"the C kernel attention_core.{kernel} is not built in this checkout"
    return None


def main(argv: list[str]) -> int:
    missing = missing_pins([REPO / name for name in argv])
    reason = this_checkout_installed()
    if reason:
        missing.append(reason)
    for line in missing:
        print(f"to install: {line}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
