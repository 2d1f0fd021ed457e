"""The lab web's HTTP/3 front: `build/bin/h3front` (Go, quic-go; source in h3front/) beside nginx.

With `http3 = true` under a lab profile's `[web]`, the front listens on UDP 443 of every web address with the
same certificates nginx serves (picked by SNI), and passes each request to nginx over plain HTTP/1.1 on the
server namespace's loopback, so HTTP/3 answers carry the bytes, headers and waits of the HTTP/2 ones. nginx then
announces it on every answer (`Alt-Svc`). docs/web.md, "HTTP/3". With ECH (`[web] ech`) the front takes TCP
443 of the web addresses too, which nginx then leaves to it (docs/web.md, "ECH").

Before a replay (harness/lab/replayweb.py) the front passes each request over TLS to the replay's nginx on the
address it came to instead, so its answers carry the recorded bytes, headers and waits (docs/replay.md).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from harness.accounts import BIND_LOW_PORT, Account
from harness.lab.config import LabConfig
from harness.lab.ech import EchKeys, ech_log
from harness.lab.svcb import load_shares, site_kinds
from harness.paths import PROJECT_ROOT

H3FRONT = PROJECT_ROOT / "build" / "bin" / "h3front"
#: nginx's plain HTTP listener for the front, on the server namespace's loopback (no lab client reaches it).
UPSTREAM = ("127.0.0.1", 8080)
#: The front accepts TCP here once every UDP socket is bound: what `lab up` waits for.
READY = ("127.0.0.1", 8081)
#: What nginx adds to every answer when the front runs: HTTP/3 on the same address's UDP 443, for a day.
ALT_SVC = 'h3=":443"; ma=86400'


def front_config(
    addresses: list[str], certs: dict[str, Path], key: Path, run: Path, files: dict | None, ech: EchKeys | None = None
) -> dict:
    """The front's configuration: the web addresses, each zone's certificate (the zone and *.zone, as nginx's
    server block for it names them), the key they share, its access log; ``files``: what it may answer from
    files itself, as nginx would (`front_files` of harness/lab/nginx.py), else None: nginx answers all; ``ech``:
    the lab's Encrypted Client Hello configuration and key (harness/lab/ech.py)."""
    return {
        "addresses": addresses,
        "port": 443,
        "key": str(key),
        "certificates": [{"names": [zone, f"*.{zone}"], "cert": str(cert)} for zone, cert in certs.items()],
        "upstream": f"{UPSTREAM[0]}:{UPSTREAM[1]}",
        "ready": f"{READY[0]}:{READY[1]}",
        "access_log": str(run / "logs" / "h3front-access.log"),
        "files": files,
        "ech": {"config": str(ech.config_file), "key": str(ech.key_file), "log": str(ech_log(run))} if ech else None,
        # With ECH the front takes TCP 443 too: Debian 12's nginx (OpenSSL 3.0) cannot decrypt it (h3front/tcp.go)
        "tcp": ech is not None,
    }


def replay_front_config(addresses: list[str], certificates: list[tuple[list[str], Path]], key: Path, run: Path) -> dict:
    """The front before a replay's nginx: ``certificates`` as (hostnames, file), each request passed over TLS to
    port 443 of the address it came to (h3front/upstream_tls.go), verified against the lab's CA."""
    return {
        "addresses": addresses,
        "port": 443,
        "key": str(key),
        "certificates": [{"names": names, "cert": str(cert)} for names, cert in certificates],
        "upstream_tls": {"ca": str(run / "ca.pem")},
        "ready": f"{READY[0]}:{READY[1]}",
        "access_log": str(run / "logs" / "h3front-access.log"),
        "files": None,
    }


def write_front(run: Path, config: dict, account: Account) -> Path:
    """Write the configuration, the front's own copy of the web key (readable by ``account`` only) and its
    access log, which ``account`` may append to (the logs directory is root's)."""
    access = Path(config["access_log"])
    access.touch()
    os.chown(access, account.uid, account.gid)
    certs = run / "certs"
    own_key = certs / "h3front.key"  # the web key is root's: nginx's master reads it before dropping privileges
    shutil.copyfile(config["key"], own_key)
    os.chown(own_key, account.uid, account.gid)
    own_key.chmod(0o400)
    config = config | {"key": str(own_key)}
    if config.get("ech"):  # its own copy of the ECH key too (root's), and its log
        Path(config["ech"]["log"]).touch()
        os.chown(config["ech"]["log"], account.uid, account.gid)
        own_ech = certs / "h3front-ech.key"
        shutil.copyfile(config["ech"]["key"], own_ech)
        os.chown(own_ech, account.uid, account.gid)
        own_ech.chmod(0o400)
        config["ech"] = config["ech"] | {"key": str(own_ech)}
    path = run / "h3front.json"
    path.write_text(json.dumps(config, indent=1) + "\n")
    return path


def front_argv(config_file: Path, account: Account) -> list[str]:
    """The front's command line, as ``account`` (it binds UDP 443, so it keeps only CAP_NET_BIND_SERVICE)."""
    return account.run_as([account.program(H3FRONT), "-config", str(config_file)], keep=(BIND_LOW_PORT,))


def announced_hosts(config: LabConfig, hostnames: list[str], host_domain: dict[str, str]) -> list[str]:
    """Of the synthetic web's ``hostnames``, those a browser may find HTTP/3 for with the front up: every one,
    unless the web gives sites HTTPS records, where a site of kind `none` announces it neither way (no record, no
    Alt-Svc: harness/lab/nginx.py) and its hosts are never tried over QUIC."""
    web = config.settings.web
    if not web.https_records:
        return list(hostnames)
    kinds = site_kinds(web.seed, sorted(set(host_domain.values())), load_shares(web.https_records))
    return [name for name in hostnames if kinds.get(host_domain.get(name, ""), "none") != "none"]
