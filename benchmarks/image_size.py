"""Where the image's bytes go: its size, its layers, and the parts inside them (docs/deploy.md, "Size").

Reads an image built by docker/build.sh: the size podman reports (the figure the issue's 1.2 GB
limit is about), each layer from `podman history`, and the parts of the file system with `du` on the
image mounted read-only (`podman image mount`, root). The browsers are rows of their own, so what
Chromium adds beside Firefox reads off one run, and the same run on an image built before shows
what a change saved.

    .venv/bin/python -m benchmarks.image_size [IMAGE]    # default localhost/dnsstudy:latest
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

# The parts, each a path inside the image; `du` counts each file once, in the first part naming it.
PARTS = {
    "Firefox ESR": "usr/lib/firefox-esr",
    "Chromium": "usr/lib/chromium",
    "shared libraries": "usr/lib/x86_64-linux-gnu",
    "/usr/share": "usr/share",
    "Python (Debian's)": "usr/lib/python3.11",
    "virtual environment": "opt/dnsstudy/src/.venv",
    "helpers (Go, C)": "opt/dnsstudy/bin",
    "geckodriver": "opt/dnsstudy/geckodriver-0.37.1",
    "the checkout": "opt/dnsstudy/src",
    "/var": "var",
}
MB = 1e6


def podman(*args: str) -> str:
    return subprocess.run(["podman", *args], capture_output=True, text=True, check=True).stdout


def du_mb(root: Path, paths: list[str]) -> dict[str, float]:
    """Megabytes under each path, in order, each file counted in the first path that holds it."""
    existing = [p for p in paths if (root / p).exists()]
    out = subprocess.run(["du", "-s", "-B1", *existing], capture_output=True, text=True, cwd=root, check=True).stdout
    sizes = {line.split("\t")[1]: int(line.split("\t")[0]) / MB for line in out.splitlines()}
    return {p: sizes.get(p, 0.0) for p in paths}


def largest_packages(venv: Path, count: int) -> list[tuple[float, str]]:
    site = next(venv.glob("lib/python3*/site-packages"))
    sizes = du_mb(site, sorted(p.name for p in site.iterdir()))
    return sorted(((mb, name) for name, mb in sizes.items()), reverse=True)[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("image", nargs="?", default="localhost/dnsstudy:latest")
    image = parser.parse_args().image

    total = int(podman("image", "inspect", "--format", "{{.Size}}", image)) / MB
    print(f"{image}: {total:,.0f} MB")
    print("\nlayers (podman history), 1 MB and more:")
    for layer in json.loads(podman("history", "--format", "json", image)):
        if layer["size"] >= MB:
            step = layer["CreatedBy"].strip()
            print(f"  {layer['size'] / MB:8,.0f} MB  {step if len(step) <= 90 else '...' + step[-87:]}")

    root = Path(podman("image", "mount", image).strip())
    try:
        parts = du_mb(root, list(PARTS.values()))
        print("\nparts (du; the checkout's row is without its virtual environment):")
        for name, path in PARTS.items():
            print(f"  {parts[path]:8,.0f} MB  {name:22} /{path}")
        print("\nlargest in the virtual environment:")
        for mb, package in largest_packages(root / PARTS["virtual environment"], 12):
            print(f"  {mb:8,.0f} MB  {package}")
    finally:
        podman("image", "unmount", image)
    chromium = parts[PARTS["Chromium"]]
    print(f"\nwithout Chromium's own directory: {total - chromium:,.0f} MB (Chromium: {chromium:,.0f} MB)")


if __name__ == "__main__":
    main()
