"""The HTTP/3 front's configuration (no lab): what nginx and the front are told with `[web] http3` on and off."""

from __future__ import annotations

from pathlib import Path

from harness.lab.config import load_lab_config
from harness.lab.h3front import ALT_SVC, READY, UPSTREAM, front_config
from harness.lab.nginx import front_files, nginx_config
from harness.lab.zones import ZoneData


def _nginx(http3: bool) -> str:
    zones = ZoneData(records={"a.test": {"a.test": "198.18.1.100", "www.a.test": "198.18.1.100"}})
    certs = {"a.test": Path("/run/x/certs/a.test.pem")}
    badcert = ("198.18.1.62", Path("/run/x/bad.pem"), Path("/run/x/bad.key"))
    return nginx_config(zones, Path("/run/x"), Path("/web"), certs, Path("/run/x/web.key"), badcert, http3)


def test_http3_is_off_by_default_and_on_in_its_profile():
    assert not load_lab_config().settings.web.http3
    assert load_lab_config("profiles/lab/http3.toml").settings.web.http3


def test_nginx_announces_the_front_and_listens_for_it_only_with_http3():
    upstream = f"listen {UPSTREAM[0]}:{UPSTREAM[1]};"
    plain, h3 = _nginx(False), _nginx(True)
    assert "Alt-Svc" not in plain and upstream not in plain
    assert f"add_header Alt-Svc '{ALT_SVC}' always;" in h3
    assert h3.count(upstream) == 1  # the zone's server block; badcert has no HTTP/3
    assert h3.index(upstream) < h3.index("server_name a.test *.a.test;")


def test_the_front_is_told_each_zone_s_certificate_and_files_as_nginx_serves_them():
    certs = {"a.test": Path("/c/a.test.pem"), "lab.test": Path("/c/lab.test.pem")}
    files = front_files(Path("/web"), list(certs))
    config = front_config(["198.18.1.100"], certs, Path("/c/web.key"), Path("/run/x"), files)
    assert config["certificates"][0] == {"names": ["a.test", "*.a.test"], "cert": "/c/a.test.pem"}
    assert config["ready"] == f"{READY[0]}:{READY[1]}" and config["port"] == 443
    assert config["access_log"] == "/run/x/logs/h3front-access.log"
    roots = {s["names"][0]: s["root"] for s in files["sites"]}
    assert roots == {"a.test": "/web/pages/a.test", "lab.test": "/web/lab"}
    assert files["shared"] == {"/o/": "/web"}
    assert ["Cache-Control", "no-store"] in files["add_headers"] and ["Alt-Svc", ALT_SVC] in files["add_headers"]
