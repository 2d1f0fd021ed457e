"""The synthetic web follows its page-shape model and is deterministic from the seed."""

from __future__ import annotations

import statistics
import struct
import zlib

import pytest

from harness.errors import HarnessError
from harness.lab.config import load_lab_config
from harness.lab.pageshape import load_page_shape
from harness.lab.web import bucket_sizes, build_web, fingerprint, write_web
from harness.paths import project_path
from harness.sitelist import load_site_list


@pytest.fixture(scope="module")
def inputs():
    settings = load_lab_config().settings.web
    sites = load_site_list(project_path(settings.sites), settings.top)
    return sites, load_page_shape(settings.shape), settings.seed


@pytest.fixture(scope="module")
def web(inputs):
    return build_web(*inputs)


def test_site_list_is_the_papers_2000(inputs):
    sites, _, _ = inputs
    assert len(sites) == 2000
    assert sites[0].domain == "google.com" and sites[0].group == "top"
    assert sites[999].group == "top" and sites[1000].group == "tail"


def test_hostnames_follow_the_reference_figures(web):
    counts = [len(p.hostnames) for p in web.pages]
    # Hounsel et al. 2019: median 10, mean 16, max 216 distinct hostnames.
    assert 9 <= statistics.median(counts) <= 11
    assert 14.5 <= statistics.mean(counts) <= 17.5
    assert max(counts) <= 216
    assert min(counts) >= 1


def test_requests_and_bytes_follow_http_archive(web):
    requests = [len(p.objects) + 1 for p in web.pages]
    kbytes = [p.bytes / 1000 for p in web.pages]
    assert 66 <= statistics.median(requests) <= 82  # 74
    assert 1500 <= statistics.median(kbytes) <= 2400  # about 1,900 KB


def test_every_hostname_is_used_and_mapped(web):
    for page in web.pages:
        used = {o.host for o in page.objects}
        assert used == set(page.hostnames), page.site
        assert len(set(page.hostnames)) == len(page.hostnames)
        for host in page.hostnames:
            assert host in web.host_domain


def test_late_hostnames_only_reached_through_the_loader(web):
    with_late = [p for p in web.pages if p.late_hostnames]
    assert len(with_late) > len(web.pages) / 2
    for page in with_late[:200]:
        loader = [o for o in page.objects if o.url.endswith(f"/o/late/{page.site}.js")]
        assert len(loader) == 1 and not loader[0].late
        assert loader[0].host not in page.late_hostnames
        late_objects = {o.host for o in page.objects if o.late}
        assert late_objects == set(page.late_hostnames)


def test_deterministic_from_seed(inputs, web):
    sites, shape, seed = inputs
    again = build_web(sites, shape, seed)
    assert [[o.url for o in p.objects] for p in again.pages] == [[o.url for o in p.objects] for p in web.pages]
    other = build_web(sites, shape, seed + 1)
    assert [p.hostnames for p in other.pages] != [p.hostnames for p in again.pages]
    assert fingerprint(sites, shape, seed) != fingerprint(sites, shape, seed + 1)


def test_written_files_are_valid(inputs, tmp_path):
    sites, shape, seed = inputs
    web = build_web(sites[:20], shape, seed)
    write_web(web, shape, seed, tmp_path)
    for size in bucket_sizes(shape):
        png = (tmp_path / "o" / "img" / f"{size}.png").read_bytes()
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and png.endswith(b"IEND\xaeB`\x82")
        assert abs(len(png) - size) <= 80
        # every chunk's CRC is right, so decoders accept the image
        pos = 8
        while pos < len(png):
            (length,) = struct.unpack(">I", png[pos : pos + 4])
            kind_data = png[pos + 4 : pos + 8 + length]
            (crc,) = struct.unpack(">I", png[pos + 8 + length : pos + 12 + length])
            assert zlib.crc32(kind_data) == crc
            pos += 12 + length
        js = (tmp_path / "o" / "js" / f"{size}.js").read_bytes()
        assert js.endswith(b"*/") and js.count(b"*/") == 1 and abs(len(js) - size) <= 2
    page = web.pages[0]
    html = (tmp_path / "pages" / page.site / "index.html").read_text()
    for obj in page.objects:
        assert (obj.url in html) != obj.late
    if page.late_hostnames:
        loader = (tmp_path / "o" / "late" / f"{page.site}.js").read_text()
        assert all(o.url in loader for o in page.objects if o.late)


def test_site_list_errors_name_the_line(tmp_path):
    path = tmp_path / "list.txt"
    path.write_text("example.com\n# comment\nexample.org\nexample.com\n")
    with pytest.raises(HarnessError, match=r"list.txt:4: duplicate of line 1: example.com"):
        load_site_list(path, 1)
    path.write_text("example.com\nBad_Domain.com\n")
    with pytest.raises(HarnessError, match=r"list.txt:2: not a lower-case ASCII domain name"):
        load_site_list(path, 1)
    path.write_text("# nothing\n")
    with pytest.raises(HarnessError, match="empty"):
        load_site_list(path, 1)
