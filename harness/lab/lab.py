"""`Lab` (a `Place`): `lab up | down | status` and the lab's checks, one object per prefix.

`up` makes the run directory and the state file (state.py) first, then the
certificates (certificates.py), the zones and web configurations, the
namespaces (topology.py) and the servers (servers.py). `down` does not trust
the state file alone: it also kills any process left in the lab's
namespaces and removes everything derived from the prefix, so it cleans up
after crashes and half-finished `up`s.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from functools import cached_property
from pathlib import Path

from harness import netns
from harness.accounts import helper
from harness.daemons import Daemon, kill_namespace_processes, stop_all
from harness.errors import HarnessError, require_program, require_root
from harness.lab import faults, topology
from harness.lab.certificates import LabTls, make_certificates
from harness.lab.checks import CheckResult
from harness.lab.config import LabConfig
from harness.lab.ech import EchKeys, ech_hosts, ech_log, make_ech
from harness.lab.h3front import H3FRONT, announced_hosts, front_config, write_front
from harness.lab.nginx import front_files, nginx_config, silent_zones
from harness.lab.pageshape import load_page_shape
from harness.lab.querylog import Reply, log_sizes, nxdomain_names, page_replies
from harness.lab.replayweb import ReplayWeb, events_log
from harness.lab.servers import DNSPROXY, Endpoint, LabServers
from harness.lab.state import LabStatus, lab_status, load_daemons, save_state
from harness.lab.unbound import DOH3_PORT, DOQ_PORT
from harness.lab.web import SyntheticWeb, build_web
from harness.lab.webcache import ensure_web
from harness.lab.zones import (
    LAB_ZONE,
    ZoneData,
    build_zones,
    https_record_owners,
    infrastructure_names,
    resolver_tls_name,
    root_zone_file,
    unbound_local_data,
)
from harness.paths import PROJECT_ROOT, RUN_ROOT, project_path
from harness.place import (
    CLIENT_IF,
    SHAPER_CLIENT_IF,
    SHAPER_SERVER_IF,
    ClientSide,
    Fault,
    Place,
    ProbePeer,
    Resolver,
)
from harness.replay.events import ReplayEvents, ReplayWindow, read_events
from harness.sitelist import load_site_list

PROGRAMS = {"ip": "iproute2", "unbound": "unbound", "nginx": "nginx", "iptables": "iptables"}
OUTSIDE_NAME = "this-name-is-not-in-the-lab.net"
ARCHIVE_MARKER = "web-archive"  # in the run directory: the archive `lab up --web` was given
REPLAY_HTTPS = "replay-https.txt"  # in the run directory: what the replay zone publishes of the HTTPS records
#: Seconds the daemons get to listen. The wait ends as soon as all listen or one dies, so a long one costs
#: nothing when the lab is healthy; nginx took 23 s on a 2-core host at load 10-13, and a compose worker
#: with 10 s failed three lab starts in a row there (2026-11-28) and was restarted each time.
UP_WAIT = 60.0


class Lab(Place):
    """One lab, named by its prefix."""

    kind = "lab"

    def __init__(self, config: LabConfig):
        self.config = config
        self.name = config.prefix
        self.run_dir = RUN_ROOT / config.prefix
        self.state_file = self.run_dir / "state.json"
        self._owners: tuple[tuple[int, int], frozenset[str]] | None = None  # the root zone's HTTPS owners, by stat

    # -- the place ------------------------------------------------------

    @property
    def namespaces(self) -> dict[str, str]:
        return self.config.namespaces

    @property
    def up_command(self) -> str:
        return "dnsstudy lab up"

    def bring_up(self) -> bool:
        """`lab up` with the lab's profile (a no-op if it is up)."""
        return self.up()

    def resolver_names(self) -> list[str]:
        return [r.name for r in self.config.settings.resolvers]

    def link_ends(self) -> list[tuple[str, str]]:
        """Both ends of both veths: client, shaper (twice), server."""
        ns = self.namespaces
        return [
            (ns["client"], CLIENT_IF),
            (ns["shaper"], SHAPER_CLIENT_IF),
            (ns["shaper"], SHAPER_SERVER_IF),
            (ns["server"], topology.SERVER_IF),
        ]

    def probe_peer(self) -> ProbePeer:
        """The echo and the rate receiver run in the server namespace on the authoritative's address."""
        return ProbePeer(self.namespaces["client"], self.namespaces["server"], self.config.addresses.auth)

    def describe(self) -> dict[str, str]:
        return {"place": f"{self.kind}:{self.name}", "lab_profile": str(self.config.source)}

    def served_sites(self) -> set[str]:
        """The sites of the lab profile's list, all of which the synthetic web serves (or the archive's)."""
        replay = self.replay_web()
        if replay:
            return set(replay.sites)
        settings = self.config.settings.web
        return {site.domain for site in load_site_list(project_path(settings.sites), settings.top)}

    def page_url(self, site: str, planned: str) -> str:
        """A replayed site's page as the archive recorded it (its scheme and host), else ``planned``."""
        return self._replayed_pages.get(site, planned)

    @cached_property
    def _replayed_pages(self) -> dict[str, str]:
        """Site -> page URL of the archive this lab serves (read once: every site of the archive is loaded)."""
        replay = self.replay_web()
        return dict(zip(replay.sites, replay.urls, strict=True)) if replay else {}

    def apply_faults(self, pairs: list[tuple[str, str]], owner: str) -> None:
        """Apply (fault name, resolver) pairs as ``owner`` (see harness/lab/faults.py)."""
        for name, resolver in pairs:
            faults.apply(self, faults.parse_fault(name, resolver, owner))

    def clear_faults(self) -> None:
        faults.clear(self)

    def active_faults(self) -> list[Fault]:
        return faults.applied(self)

    @property
    def clear_faults_command(self) -> str:
        # The prefix names the lab's namespaces and run directory, all that clearing needs, whatever its profile.
        return f"dnsstudy lab fault clear --prefix {self.name}"

    def web(self) -> SyntheticWeb:
        """The synthetic web this lab's profile describes (built in memory, not cached)."""
        settings = self.config.settings.web
        sites = load_site_list(project_path(settings.sites), settings.top)
        return build_web(sites, load_page_shape(settings.shape), settings.seed)

    # -- status, client side, resolvers ----------------------------------

    @property
    def ca_path(self) -> Path:
        return self.run_dir / "ca.pem"

    def status(self) -> LabStatus:
        """Namespaces, daemons (alive or dead) and resolver endpoints of this lab."""
        return lab_status(self.config, self.state_file, self.ca_path)

    def client_side(self) -> ClientSide:
        """The client namespace as a place where DNS arms and the browser run."""
        return ClientSide(
            namespace=self.config.namespaces["client"],
            run_dir=self.run_dir,
            ca_file=self.ca_path,
            dead_resolver=self.config.addresses.refused,
            system_resolver=self.config.addresses.resolver(0),
            quic_ca_hosts=self._quic_ca_hosts(),
            web_http3=self.config.settings.web.http3,
        )

    def _quic_ca_hosts(self) -> tuple[str, ...]:
        """The web's hostnames a browser may find HTTP/3 for, sorted (the same at every visit); none without it.

        Only those announced: a host never announced HTTP/3 is never tried over QUIC, and Chromium's switch has
        room for about 3,700 names (harness/browser/chromium_quic.py). A replay offers HTTP/3 per address, every
        host at such an address announced by nginx's Alt-Svc and certified by the front: all those hosts."""
        if not self.config.settings.web.http3:
            return ()
        replay = self.replay_web()
        if replay:
            return tuple(replay.h3_hostnames(http3=True))
        return tuple(announced_hosts(self.config, self.web_hostnames(), ensure_web(self.config)[1]))

    def resolver(self, name: str) -> Resolver:
        """A lab resolver by name, with its statistics for arm proofs."""
        for i, settings in enumerate(self.config.settings.resolvers):
            if settings.name == name:
                address, tls_name = self.config.addresses.resolver(i), resolver_tls_name(name)
                return Resolver(
                    name=name,
                    address=address,
                    tls_name=tls_name,
                    doh_uri=f"https://{tls_name}/dns-query",
                    control_config=self.run_dir / f"resolver-{name}.conf",
                    doq_port=DOQ_PORT,
                    doh3_uri=f"https://{tls_name}:{DOH3_PORT}/dns-query",
                )
        names = ", ".join(r.name for r in self.config.settings.resolvers)
        raise HarnessError(f"lab '{self.config.prefix}' has no resolver '{name}' (it has: {names})")

    # -- up -------------------------------------------------------------

    def up(self, wait: float = UP_WAIT) -> bool:
        """Bring the lab up. Returns False if it was already up (a no-op)."""
        require_root("lab up")
        for program, package in PROGRAMS.items():
            require_program(program, package)
        if not DNSPROXY.exists():
            raise HarnessError(f"{DNSPROXY} is missing: run 'bash scripts/setup.sh' (it builds the DoQ/DoH3 front)")
        if self.config.settings.web.http3 and not H3FRONT.exists():
            raise HarnessError(f"{H3FRONT} is missing: run 'bash scripts/setup.sh' (it builds the HTTP/3 front)")
        if self.state_file.exists():
            status = self.status()
            if status.healthy:
                return False
            raise HarnessError(
                f"lab '{self.config.prefix}' is up but broken "
                f"(dead: {', '.join(status.dead) or 'namespaces missing'}): "
                "run 'dnsstudy lab down' first"
            )
        topology.check_collisions(self.config)
        if any(netns.exists(n) for n in self.config.namespaces.values()):
            raise HarnessError(
                f"namespaces of lab '{self.config.prefix}' exist without a state file: run 'dnsstudy lab down' first"
            )
        old_umask = os.umask(0o022)  # daemons that drop privileges must read their files
        try:
            self._up(wait)
        except BaseException:
            self.down()
            raise
        finally:
            os.umask(old_umask)
        return True

    def _up(self, wait: float) -> None:
        cfg = self.config
        archive = self.archive_dir
        replay = ReplayWeb.plan(cfg, archive) if archive else None  # a broken archive fails before anything runs
        self._prepare_run_dir()
        web_root, host_domain = ensure_web(cfg)  # www.lab.test's page comes from it, even when replaying
        ech = make_ech(self.run_dir / "certs") if cfg.settings.web.ech and not replay else None
        zones = build_zones(cfg, {} if replay else host_domain, ech.config_list if ech else None)
        tls = make_certificates(cfg, self.run_dir, self.ca_path, zones)
        self._write_zone_and_web_configs(zones, web_root, tls, replay, ech)
        topology.build(cfg)
        topology.set_client_resolver(cfg, cfg.addresses.resolver(0))
        daemons, endpoints = LabServers(cfg, self.run_dir, replay).daemons(tls)
        self._start_and_wait(daemons, endpoints, wait)

    @property
    def archive_dir(self) -> Path | None:
        """The replay archive this lab serves (the profile's, or the one `lab up --web` gave), else None."""
        if self.config.settings.web.archive:
            return project_path(self.config.settings.web.archive)
        marker = self.run_dir / ARCHIVE_MARKER
        return Path(marker.read_text().strip()) if marker.exists() else None

    def replay_window(self) -> ReplayWindow | None:
        """A window on the replay server's events and the resolvers' replies from now; None: no archive served."""
        if self.archive_dir is None:
            return None
        return ReplayWindow(time.time(), log_sizes(self._resolver_logs()))

    def replay_events(self, window: ReplayWindow) -> ReplayEvents:
        """The replay server's events since ``window`` opened, and the names the lab's resolvers answered
        NXDOMAIN since (harness/lab/querylog.py)."""
        seen = read_events(events_log(self.run_dir), window.since, time.time())
        seen.dns_misses = nxdomain_names(window.log_sizes)
        return seen

    def dns_window(self) -> dict[Path, int]:
        """Where each resolver's reply log stands now (harness/lab/querylog.py)."""
        return log_sizes(self._resolver_logs())

    def dns_replies(self, window: dict[Path, int]) -> list[Reply]:
        """The replies for a page's names the lab's resolvers logged since ``window`` opened."""
        return page_replies(window)

    def ech_window(self) -> int | None:
        """Where the HTTP/3 front's connection log stands now, if the lab has ECH (harness/lab/ech.py)."""
        log = ech_log(self.run_dir)
        return log.stat().st_size if self.config.settings.web.ech and log.exists() else None

    def ech_hosts(self, window: int) -> dict[str, bool]:
        """Per server name of the front's connections since ``window``: whether one accepted ECH."""
        return ech_hosts(ech_log(self.run_dir), window)

    def https_record_owners(self, resolver: str) -> frozenset[str]:
        """The names the lab's root zone (the synthetic web's, or an archive's) gives an HTTPS record, none for a
        resolver whose local data leave them out; read again only when the file changed (a zone of 25,000 lines
        takes ~18 ms, and every visit asks)."""
        zone = self.run_dir / "root.zone"
        settings = {r.name: r for r in self.config.settings.resolvers}.get(resolver)
        if not zone.exists() or not getattr(settings, "https_records", True):
            return frozenset()
        stat = zone.stat()
        key = (stat.st_mtime_ns, stat.st_size)
        if self._owners is None or self._owners[0] != key:
            self._owners = (key, https_record_owners(zone.read_text()))
        return self._owners[1]

    def replay_web(self) -> ReplayWeb | None:
        """The archive's web as placed in this lab, if it replays one."""
        archive = self.archive_dir
        return ReplayWeb.plan(self.config, archive) if archive else None

    def _resolver_logs(self) -> list[Path]:
        return [self.run_dir / "logs" / f"resolver-{r.name}.log" for r in self.config.settings.resolvers]

    def _prepare_run_dir(self) -> None:
        """Make the run directories and an empty state file."""
        run = self.run_dir
        for d in (run, run / "logs", run / "certs", run / "nginx-tmp"):
            d.mkdir(parents=True, exist_ok=True)
        save_state(self.state_file, self.config, [])  # from here on, `down` knows this lab exists

    def _write_zone_and_web_configs(
        self, zones: ZoneData, web_root: Path, tls: LabTls, replay: ReplayWeb | None = None, ech: EchKeys | None = None
    ) -> None:
        """Resolver local data, the authoritative's root zone (with an archive's records) and nginx.conf."""
        run = self.run_dir
        (run / "local-data.conf").write_text(unbound_local_data(zones))
        (run / "local-data-bare.conf").write_text(unbound_local_data(zones, https=False))
        extra = replay.zone_lines() if replay else ""
        (run / "root.zone").write_text(root_zone_file(zones, self.config.addresses.auth) + extra)
        if replay:  # what a resolver without HTTPS records reads (harness/lab/zones.py, replay_zone_file)
            bare = root_zone_file(zones, self.config.addresses.auth) + replay.zone_lines(https=False)
            (run / "root-bare.zone").write_text(bare)
        if replay:
            (run / ARCHIVE_MARKER).write_text(f"{replay.archive_dir.resolve()}\n")
            (run / REPLAY_HTTPS).write_text(replay.https_summary() + "\n")  # `lab check` says it, unplanned
        synthetic_h3 = self.config.settings.web.http3 and not replay  # a replay's front: harness/lab/replayweb.py
        (run / "nginx.conf").write_text(
            nginx_config(zones, run, web_root, tls.zone_certs, tls.web_key_file, tls.badcert, synthetic_h3)
        )
        if synthetic_h3:  # the synthetic web (no waits): its files answered by the front
            addresses = self.config.addresses.web(self.config.settings.web_addresses)
            files = front_files(web_root, list(tls.zone_certs), silent_zones(zones))
            front = front_config(addresses, tls.zone_certs, tls.web_key_file, run, files, ech)
            write_front(run, front, helper())

    def _start_and_wait(self, daemons: list[Daemon], endpoints: list[Endpoint], wait: float) -> None:
        """Start the daemons in order, record them, then wait up to `wait` s for every endpoint to accept."""
        for d in daemons:
            d.start()
        save_state(self.state_file, self.config, daemons)
        self._wait_for(daemons, endpoints, wait)

    def restart(self, names: set[str], wait: float = UP_WAIT) -> None:
        """Restart the named daemons (a lab fault changed their certificate) and wait for their TCP ports."""
        daemons = load_daemons(self.state_file)
        chosen = [d for d in daemons if d.name in names]
        stop_all(chosen)
        for d in chosen:
            d.start()
        save_state(self.state_file, self.config, daemons)
        tcp = [a.rpartition(":") for d in chosen for a in d.addresses if not a.endswith("/udp")]
        self._wait_for(chosen, [(host, int(port)) for host, _, port in tcp], wait)

    def _wait_for(self, daemons: list[Daemon], endpoints: list[Endpoint], wait: float) -> None:
        """Wait up to `wait` s for every endpoint to accept, but give up at once if a daemon died."""
        deadline = time.monotonic() + wait
        missing = endpoints
        while True:
            missing = netns.wait_tcp(self.config.namespaces["server"], missing, timeout=0.5)
            dead = [d.name for d in daemons if not d.alive()]
            if dead or not missing or time.monotonic() >= deadline:
                break
        if dead or missing:
            logs = "; ".join(f"{d.name}: {_tail(d.log)}" for d in daemons if d.name in dead)
            raise HarnessError(f"lab did not come up: dead {dead or 'none'}, not listening {missing or 'none'}. {logs}")

    # -- checks ---------------------------------------------------------

    def check_spec(self, web_sites: int = 3) -> dict:
        """What `checks` should verify from the client namespace: the synthetic web's first ``web_sites`` pages,
        or a replayed web's sample of every site."""
        status = self.status()
        names = infrastructure_names(self.config)
        replay = self.replay_web()
        sites: list[str] = []
        if not replay:
            manifest = json.loads((self._web_root() / "manifest.json").read_text())
            sites = [p["url"] for p in manifest["pages"][:web_sites]]
        return {
            "ca": str(self.ca_path),
            "probe_name": f"www.{LAB_ZONE}",
            "probe_address": names[f"www.{LAB_ZONE}"],
            "outside_name": OUTSIDE_NAME,
            "resolvers": status.resolvers,
            "web_urls": [f"https://www.{LAB_ZONE}/"] + sites,
            "web_http3": bool(self.config.settings.web.http3 and not replay),  # the synthetic web's front
            # A replayed web: every site's page and another answer, as the archive recorded them
            "replayed": replay.samples if replay else [],
            "wait": 5,
        }

    def web_hostnames(self) -> list[str]:
        """Every hostname the lab's web uses, sorted (a domain list for resolver benchmarks)."""
        replay = self.replay_web()
        if replay:
            return replay.hostnames
        manifest = json.loads((self._web_root() / "manifest.json").read_text())
        return sorted({h for page in manifest["pages"] for h in page["hostnames"] + page["late_hostnames"]})

    def _web_root(self) -> Path:
        return ensure_web(self.config)[0]

    def run_checks(self) -> list[CheckResult]:
        """Query every resolver over every transport and fetch lab pages, from the client namespace."""
        spec_path = self.run_dir / "checks.json"
        spec_path.write_text(json.dumps(self.check_spec()))
        window = self.replay_window()
        env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
        checks = str(Path(__file__).resolve().with_name("checks.py"))
        proc = subprocess.run(
            netns.command(
                self.config.namespaces["client"],
                [sys.executable, "-I", checks, str(spec_path), helper().name],
            ),
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        if proc.returncode != 0:
            raise HarnessError(
                f"lab checks crashed: {proc.stderr.strip().splitlines()[-1] if proc.stderr else proc.returncode}"
            )
        results = [CheckResult(**r) for r in json.loads(proc.stdout)]
        return results + self._replay_errors(window) + self._replay_https()

    def _replay_https(self) -> list[CheckResult]:
        """A replayed web's HTTPS records as its zone publishes them, rewritten for the lab (docs/replay.md):
        a row that informs, never fails."""
        summary = self.run_dir / REPLAY_HTTPS
        if not summary.exists():
            return []
        # not named "replay ...": that names a site's sample (tests/test_har_replay_lab.py counts them)
        return [CheckResult("HTTPS records of the replay zone", True, summary.read_text().strip(), 0.0)]

    def _replay_errors(self, window: ReplayWindow | None) -> list[CheckResult]:
        """A failed check per answer the replay could not give as recorded while the checks fetched."""
        seen = self.replay_events(window) if window else None
        return [CheckResult(f"replay error: {e['url']}", False, e["reason"], 0.0) for e in seen.errors] if seen else []

    # -- down -----------------------------------------------------------

    def down(self) -> list[str]:
        """Remove everything this lab made, whatever state it is in. Returns what was removed."""
        require_root("lab down")
        removed = []
        daemons = load_daemons(self.state_file)
        stop_all(daemons)
        removed += [f"process {d.name}" for d in daemons]
        stray = kill_namespace_processes(list(self.config.namespaces.values()))
        removed += [f"stray process {pid}" for pid in stray]
        for name in self.config.namespaces.values():
            if netns.exists(name) or (netns.ETC_NETNS / name).exists():
                removed.append(f"namespace {name}")
        topology.destroy(self.config)
        if self.run_dir.exists():
            shutil.rmtree(self.run_dir, ignore_errors=True)
            removed.append(f"directory {self.run_dir}")
        return removed


def _tail(path: str, lines: int = 2) -> str:
    try:
        return " | ".join(Path(path).read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"
