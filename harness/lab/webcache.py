"""The synthetic web on disk, generated once per (site list, page shape, seed).

Generation takes a few seconds for 2,000 sites, so the files are kept in
/var/cache/dnsstudy/web/<fingerprint>/ and reused by every later `lab up`;
the fingerprint changes whenever an input does. `dnsstudy lab purge-cache`
removes them.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from harness.lab.config import LabConfig
from harness.lab.pageshape import load_page_shape
from harness.lab.web import build_web, fingerprint, write_web
from harness.paths import project_path
from harness.sitelist import load_site_list

CACHE_ROOT = Path(os.environ.get("DNSSTUDY_CACHE", "/var/cache/dnsstudy")) / "web"

_LAB_PAGE = (
    b'<!doctype html><html><head><meta charset="utf-8"><title>lab</title></head>'
    b"<body><p>dnsstudy lab</p></body></html>\n"
)


def ensure_web(config: LabConfig) -> tuple[Path, dict[str, str]]:
    """The web root for this lab's settings and its hostname -> registered domain map."""
    w = config.settings.web
    sites = load_site_list(project_path(w.sites), w.top)
    shape = load_page_shape(w.shape)
    root = CACHE_ROOT / fingerprint(sites, shape, w.seed)
    hosts_file = root / "hosts.json"
    if not hosts_file.exists():
        web = build_web(sites, shape, w.seed)
        tmp = root.with_name(root.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        write_web(web, shape, w.seed, tmp)
        (tmp / "lab").mkdir()
        (tmp / "lab" / "index.html").write_bytes(_LAB_PAGE)
        (tmp / "hosts.json").write_text(json.dumps(web.host_domain, separators=(",", ":")))
        root.parent.mkdir(parents=True, exist_ok=True)
        try:
            tmp.rename(root)  # atomic: a half-written web is never used
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)  # another process won the race
    return root, json.loads(hosts_file.read_text())


def purge() -> int:
    """Delete every cached web; returns how many were removed."""
    if not CACHE_ROOT.exists():
        return 0
    count = sum(1 for _ in CACHE_ROOT.iterdir())
    shutil.rmtree(CACHE_ROOT)
    return count
