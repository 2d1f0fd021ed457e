"""The HTTP/3 front's configuration (no lab): what nginx and the front are told with `[web] http3` on and off."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from harness.lab.config import load_lab_config
from harness.lab.ech import EchKeys
from harness.lab.h3front import ALT_SVC, READY, UPSTREAM, front_config
from harness.lab.nginx import front_files, nginx_config
from harness.lab.zones import ZoneData
from harness.paths import PROJECT_ROOT


def _nginx(http3: bool, ech: str | None = None) -> str:
    zones = ZoneData(records={"a.test": {"a.test": "198.18.1.100", "www.a.test": "198.18.1.100"}}, ech=ech)
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
    assert "tcp" in config and not config["tcp"]


def test_with_ech_the_front_takes_tcp_and_nginx_listens_on_its_upstream_only():
    h3, ech = _nginx(True), _nginx(True, ech="AEX+DQ==")
    assert "listen 198.18.1.100:443 ssl http2;" in h3 and "listen 198.18.1.100:443" not in ech
    assert f"listen {UPSTREAM[0]}:{UPSTREAM[1]};" in ech and "listen 198.18.1.62:443 ssl http2 default_server;" in ech
    keys = EchKeys(Path("/c/ech.config"), Path("/c/ech.key"), "AEX+DQ==")
    config = front_config(["198.18.1.100"], {"a.test": Path("/c/a.pem")}, Path("/c/k"), Path("/run/x"), None, keys)
    assert config["tcp"] and config["ech"]["log"] == "/run/x/logs/h3front-ech.log"


def test_a_zone_that_announces_no_http3_has_no_alt_svc_from_the_front_either():
    files = front_files(Path("/web"), ["a.test", "b.test"], silent=frozenset({"b.test"}))
    by_name = {s["names"][0]: s for s in files["sites"]}
    assert "add_headers" not in by_name["a.test"]
    assert by_name["b.test"]["add_headers"] == [["Cache-Control", "no-store"]]


def test_the_front_s_own_go_tests_pass():
    """h3front/*_test.go: the files it answers itself, with nginx's headers (offline: modules from setup.sh)."""
    done = subprocess.run(
        ["go", "test", "-mod=readonly", "-count=1", "."],
        cwd=PROJECT_ROOT / "h3front",
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "GOFLAGS": "-mod=readonly", "GOPROXY": "off"},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
