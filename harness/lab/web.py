"""The synthetic web: one page per site, shaped by the page-shape model.

Pages reference objects on many hostnames (first-party subdomains and
third-party hosts drawn from popular sites), and a per-site loader script
inserts more while the page loads. Object bodies come from a small store of
size buckets shared by every host, so 2,000 sites cost a few MB on disk.
Everything is deterministic from the seed: a site's page depends only on the
seed, the site's name and the list's popular domains.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import math
import random
import statistics
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.lab.pageshape import RESOURCE_TYPES, PageShape, draw_counts
from harness.sitelist import Site

EXTENSIONS = {"img": "png", "js": "js", "css": "css"}
# Object sizes snap to 2^(k/2) bytes: 27 buckets between 256 B and 2 MB.
_HALF_OCTAVE = math.sqrt(2)


@dataclass
class WebObject:
    """One subresource of a page."""

    url: str
    host: str
    type: str
    size: int
    late: bool


@dataclass
class Page:
    """The synthetic page of one site."""

    site: str
    rank: int
    group: str
    url: str
    hostnames: list[str]
    late_hostnames: list[str]
    objects: list[WebObject] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(o.size for o in self.objects)


@dataclass
class SyntheticWeb:
    """Every page, and which registered domain each hostname belongs to."""

    pages: list[Page]
    host_domain: dict[str, str]  # hostname -> registered domain (a list entry)

    @property
    def domains(self) -> list[str]:
        return sorted(set(self.host_domain.values()))


def summarise(pages: list[Page]) -> list[dict[str, str]]:
    """Per group (top, tail, all): pages, hostnames per page (median, mean, max), requests, KB, late hostnames."""
    rows = []
    for group in ("top", "tail", "all"):
        sel = [p for p in pages if group == "all" or p.group == group]
        if not sel:
            continue
        hosts = [len(p.hostnames) for p in sel]
        rows.append(
            {
                "group": group,
                "pages": str(len(sel)),
                "hostnames median": f"{statistics.median(hosts):g}",
                "mean": f"{statistics.mean(hosts):.1f}",
                "max": str(max(hosts)),
                "requests median": f"{statistics.median(len(p.objects) + 1 for p in sel):g}",
                "KB median": f"{statistics.median(p.bytes for p in sel) / 1000:.0f}",
                "late hostnames mean": f"{statistics.mean(len(p.late_hostnames) for p in sel):.1f}",
            }
        )
    return rows


def bucket_sizes(shape: PageShape) -> list[int]:
    """The object sizes the blob store holds."""
    sizes = []
    size = float(shape.bytes.object_min_bytes)
    while size <= shape.bytes.object_max_bytes * 1.0001:
        sizes.append(int(round(size)))
        size *= _HALF_OCTAVE
    return sizes


def _snap(size: float, buckets: list[int]) -> int:
    i = bisect.bisect_left(buckets, size)
    if i == 0:
        return buckets[0]
    if i == len(buckets):
        return buckets[-1]
    lo, hi = buckets[i - 1], buckets[i]
    return lo if size / lo < hi / size else hi


def _third_party_pool(sites: list[Site], shape: PageShape) -> tuple[list[str], list[float], dict[str, str]]:
    """Hostnames third parties serve from, with Zipf popularity weights."""
    site_names = {s.domain for s in sites}
    hosts: list[str] = []
    weights: list[float] = []
    owner: dict[str, str] = {}
    labels = shape.third_party.labels
    for d_rank, site in enumerate(sites[: shape.third_party.pool_domains], start=1):
        for l_rank, label in enumerate(labels, start=1):
            host = f"{label}.{site.domain}"
            if host in site_names:
                continue  # a list entry of its own; it keeps its own page and address
            hosts.append(host)
            owner[host] = site.domain
            weights.append(1.0 / ((d_rank - 1) * len(labels) + l_rank) ** shape.third_party.zipf_exponent)
    return hosts, weights, owner


def _weighted_sample(rng: random.Random, items: list[str], cum_weights: list[float], k: int, exclude: str) -> list[str]:
    """k distinct items drawn by weight, skipping hostnames of one domain."""
    eligible = sum(1 for item in items if not item.endswith("." + exclude))
    k = min(k, eligible)
    chosen: dict[str, None] = {}
    while len(chosen) < k:
        for item in rng.choices(items, cum_weights=cum_weights, k=2 * (k - len(chosen))):
            if len(chosen) < k and not item.endswith("." + exclude):
                chosen[item] = None
    return list(chosen)


def _split(rng: random.Random, total: int, shares: dict[str, float]) -> dict[str, int]:
    """Split an integer total by shares, rounding so the parts sum to total."""
    raw = {t: total * shares[t] for t in RESOURCE_TYPES}
    parts = {t: int(v) for t, v in raw.items()}
    rest = total - sum(parts.values())
    for t in sorted(RESOURCE_TYPES, key=lambda t: raw[t] - parts[t] + rng.random() * 1e-9, reverse=True)[:rest]:
        parts[t] += 1
    return parts


def build_web(sites: list[Site], shape: PageShape, seed: int) -> SyntheticWeb:
    """Draw every page of the list (no files written)."""
    pool, pool_weights, host_domain = _third_party_pool(sites, shape)
    cum_weights = list(itertools.accumulate(pool_weights))
    buckets = bucket_sizes(shape)
    for site in sites:
        host_domain[site.domain] = site.domain
    first_party_labels = ["www", "static", "img", "cdn"]
    pages = []
    for site in sites:
        rng = random.Random(f"{seed}:{site.domain}")
        counts = draw_counts(shape, rng)
        first = [site.domain] + [f"{label}.{site.domain}" for label in first_party_labels[: counts.first_party - 1]]
        for host in first:
            host_domain.setdefault(host, site.domain)
        third = _weighted_sample(rng, pool, cum_weights, counts.hostnames - counts.first_party, site.domain)
        late = third[len(third) - counts.late_hostnames :] if counts.late_hostnames else []
        hostnames = first + third
        page = Page(site.domain, site.rank, site.group, f"https://{site.domain}/", hostnames, late)

        # One object per hostname first (so every hostname is contacted),
        # the rest spread with more weight on first-party hosts.
        n = counts.requests - (1 if late else 0)
        hosts_for_objects = list(hostnames)
        host_weights = [3.0 if h in first else 1.0 for h in hostnames]
        hosts_for_objects += rng.choices(hostnames, weights=host_weights, k=max(0, n - len(hostnames)))
        type_counts = _split(rng, n, shape.types.request_share)
        types = [t for t in RESOURCE_TYPES for _ in range(type_counts[t])]
        rng.shuffle(types)
        late_set = set(late)
        for i, (host, kind) in enumerate(zip(hosts_for_objects, types, strict=True)):
            mean = counts.total_bytes * shape.types.byte_share[kind] / max(1, type_counts[kind])
            sigma = shape.types.object_sigma
            size = _snap(rng.lognormvariate(math.log(mean) - sigma * sigma / 2, sigma), buckets)
            url = f"https://{host}/o/{kind}/{size}.{EXTENSIONS[kind]}?s={site.domain}&i={i}"
            page.objects.append(WebObject(url, host, kind, size, host in late_set))
        if late:
            # The loader sits on a host the HTML already references, so the
            # late hostnames are discovered only once it has run.
            loader_host = next((h for h in hostnames if h not in late_set), site.domain)
            page.objects.append(
                WebObject(f"https://{loader_host}/o/late/{site.domain}.js", loader_host, "js", 0, False)
            )
        pages.append(page)
    return SyntheticWeb(pages, host_domain)


def _png(size: int, rng: random.Random) -> bytes:
    """A valid 1x1 PNG padded to ``size`` bytes with an ancillary chunk decoders skip."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")

    head = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", (1).to_bytes(4, "big") * 2 + b"\x08\x06\x00\x00\x00")
    body = chunk(b"IDAT", zlib.compress(b"\x00\x00\x00\x00\x00"))
    tail = chunk(b"IEND", b"")
    pad = max(0, size - len(head) - len(body) - len(tail) - 12)
    return head + chunk(b"laBp", rng.randbytes(pad)) + body + tail


def _text_blob(size: int, rng: random.Random, kind: str) -> bytes:
    """A valid script or stylesheet of ``size`` bytes: a rule and an incompressible comment."""
    lead = b"window.__lab=(window.__lab||0)+1;" if kind == "js" else b".lab{margin:0}"
    # Hex never contains "*/", so the comment cannot end early.
    pad = max(0, size - len(lead) - 4)
    return lead + b"/*" + rng.randbytes(pad // 2 + 1).hex()[:pad].encode() + b"*/"


def _loader_js(page: Page) -> bytes:
    """Script that inserts the page's late objects while the page loads."""
    late = [(o.type, o.url) for o in page.objects if o.late]
    return (
        "(function(){var d=document,u=" + json.dumps(late, separators=(",", ":")) + ";"
        "u.forEach(function(x){var e;"
        "if(x[0]==='img'){e=d.createElement('img');e.src=x[1];}"
        "else if(x[0]==='js'){e=d.createElement('script');e.src=x[1];}"
        "else{e=d.createElement('link');e.rel='stylesheet';e.href=x[1];}"
        "(d.body||d.documentElement).appendChild(e);});})();\n"
    ).encode()


def _html(page: Page) -> bytes:
    head, body = [], []
    for o in page.objects:
        if o.late:
            continue
        if o.url.endswith(f"/o/late/{page.site}.js"):
            body.append(f'<script async src="{o.url}"></script>')
        elif o.type == "css":
            head.append(f'<link rel="stylesheet" href="{o.url}">')
        elif o.type == "js":
            (head if len(head) < 4 else body).append(f'<script src="{o.url}"></script>')
        else:
            body.append(f'<img alt="" src="{o.url}">')
    return (
        '<!doctype html>\n<html><head><meta charset="utf-8">'
        f"<title>{page.site}</title>\n" + "\n".join(head) + "\n</head><body>\n"
        f"<h1>{page.site}</h1><p>Synthetic page, rank {page.rank} ({page.group}).</p>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    ).encode()


def fingerprint(sites: list[Site], shape: PageShape, seed: int) -> str:
    """A short hash of everything the web is made from."""
    h = hashlib.sha256()
    h.update(repr(seed).encode())
    h.update(shape.model_dump_json().encode())
    h.update("\n".join(s.domain for s in sites).encode())
    h.update(str(sites[0].rank if sites else 0).encode())
    return h.hexdigest()[:16]


def write_web(web: SyntheticWeb, shape: PageShape, seed: int, root: Path) -> None:
    """Write pages, loaders, the blob store and manifest.json under ``root``."""
    rng = random.Random(f"{seed}:blobs")
    for kind in RESOURCE_TYPES:
        (root / "o" / kind).mkdir(parents=True, exist_ok=True)
        for size in bucket_sizes(shape):
            data = _png(size, rng) if kind == "img" else _text_blob(size, rng, kind)
            (root / "o" / kind / f"{size}.{EXTENSIONS[kind]}").write_bytes(data)
    (root / "o" / "late").mkdir(parents=True, exist_ok=True)
    for page in web.pages:
        site_dir = root / "pages" / page.site
        site_dir.mkdir(parents=True, exist_ok=True)
        (site_dir / "index.html").write_bytes(_html(page))
        if page.late_hostnames:
            (root / "o" / "late" / f"{page.site}.js").write_bytes(_loader_js(page))
    manifest = {
        "seed": seed,
        "pages": [
            {**{k: v for k, v in asdict(p).items() if k != "objects"}, "objects": len(p.objects), "bytes": p.bytes}
            for p in web.pages
        ],
    }
    (root / "manifest.json").write_text(json.dumps(manifest, separators=(",", ":")))
