"""Strip the debug symbols from a virtual environment's shared objects, keeping every one that still loads.

The builder stage of docker/Dockerfile runs it on the image's virtual environment (about 60 MB
saved). binutils' strip rewrites some libraries that auditwheel's patchelf had laid out, so that
the loader then refuses them ("ELF load command address/offset not page-aligned": numpy's
OpenBLAS): each object is loaded before and after, and one that loaded before and fails after
is put back as it was (one that does not load alone is left alone).

    .venv/bin/python docker/strip-venv.py .venv
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

LOAD = "import ctypes, sys\nfor path in sys.argv[1:]:\n    ctypes.CDLL(path)\n"
ELF = b"\x7fELF"


def loads(python: str, path: Path) -> bool:
    """Whether a fresh interpreter of the environment can load the object (its dependencies resolved)."""
    return subprocess.run([python, "-c", LOAD, str(path)], capture_output=True, timeout=60).returncode == 0


def shared_objects(root: Path) -> list[Path]:
    found = []
    for path in sorted(root.rglob("*.so*")):
        if path.is_file() and not path.is_symlink() and (path.suffix == ".so" or ".so." in path.name):
            with path.open("rb") as stream:
                if stream.read(4) == ELF:
                    found.append(path)
    return found


def main(venv: Path) -> None:
    python = str(venv / "bin" / "python")
    saved = kept = 0
    for path in shared_objects(venv / "lib"):
        before = path.stat().st_size
        if not loads(python, path):  # cannot be checked afterwards: left alone
            kept += 1
            continue
        backup = path.with_name(path.name + ".unstripped")
        shutil.copy2(path, backup)
        stripped = subprocess.run(["strip", "--strip-unneeded", str(path)], capture_output=True).returncode == 0
        if not stripped or not loads(python, path):
            backup.replace(path)  # as it was
            kept += 1
            print(f"strip-venv: kept {path.relative_to(venv)} as it was (it does not load stripped)")
            continue
        backup.unlink()
        saved += before - path.stat().st_size
    print(f"strip-venv: {saved / 1e6:.0f} MB of debug symbols removed; {kept} objects kept as they were")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
