"""Where the images' bytes go: each one's size, its layers, and the parts inside them (docs/deploy.md, "Size").

Reads images built by docker/build.sh: the size podman reports (the figure the 1.2 GB limit of the
Firefox-only image is about), each layer from `podman history`, and the parts of the file system with
`du` on the image mounted read-only (`podman image mount`, root). The browsers are rows of their own.
Given two images, it ends with what the second adds to the first and how many layers they share:
the Firefox-only image and the default one share every layer but Chromium's.

    .venv/bin/python -m benchmarks.image_size [IMAGE...]   # default localhost/dnsstudy:firefox and :latest
"""

from __future__ import annotations

import argparse
import itertools
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


LIMIT_MB = 1200  # the Firefox-only image's (tests/test_image.py)


def size_mb(image: str) -> float:
    return int(podman("image", "inspect", "--format", "{{.Size}}", image)) / MB


def layer_ids(image: str) -> list[str]:
    return json.loads(podman("image", "inspect", "--format", "{{json .RootFS.Layers}}", image))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("images", nargs="*", default=["localhost/dnsstudy:firefox", "localhost/dnsstudy:latest"])
    images = parser.parse_args().images
    for image in images:
        describe(image)
    for first, second in zip(images, images[1:], strict=False):
        pairs = zip(layer_ids(first), layer_ids(second), strict=False)
        shared = len(list(itertools.takewhile(lambda pair: pair[0] == pair[1], pairs)))
        added = size_mb(second) - size_mb(first)
        print(f"\n{second} adds {added:,.0f} MB to {first}; they share their first {shared} layers")
    for image in images:
        verdict = "within" if size_mb(image) <= LIMIT_MB else "above"
        print(f"{image}: {size_mb(image):,.0f} MB, {verdict} {LIMIT_MB:,} MB")


def describe(image: str) -> None:
    """The image's size, its layers of 1 MB and more, its parts and its largest Python packages."""
    total = size_mb(image)
    print(f"\n{image}: {total:,.0f} MB")
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
