"""The lab's state: its daemons (state.json) and its faults (faults.json), and `LabStatus`, what `lab status`
reports from them.

The state file (/run/dnsstudy/<prefix>/state.json) lists every daemon with
its pid and start time. Its existence is what makes a lab up: `lab up`
writes it (empty) before it makes anything, and `lab down` removes it last.
Beside it, faults.json lists every fault the lab carries (harness/lab/faults.py
writes it before it applies one and after it has cleared them), with who
applied it: what a crawl reads before it starts, and every visit records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from harness import netns
from harness.daemons import Daemon
from harness.durable import write_durably
from harness.errors import HarnessError
from harness.lab.config import LabConfig
from harness.lab.unbound import DOH3_PORT, DOQ_PORT
from harness.lab.zones import resolver_tls_name
from harness.paths import RUN_ROOT
from harness.place import Fault
from harness.protocols import DO53, DOH, DOH3, DOQ, DOT

FAULTS_FILE = "faults.json"


@dataclass
class LabStatus:
    """What `lab status` reports."""

    prefix: str
    up: bool
    namespaces: dict[str, bool]
    daemons: list[dict] = field(default_factory=list)
    resolvers: list[dict] = field(default_factory=list)
    run_dir: str = ""
    ca: str = ""
    faults: list[dict] = field(default_factory=list)  # name, resolver, owner of each fault the lab carries

    @property
    def dead(self) -> list[str]:
        return [d["name"] for d in self.daemons if not d["alive"]]

    @property
    def healthy(self) -> bool:
        return self.up and all(self.namespaces.values()) and not self.dead


def load_daemons(state_file: Path) -> list[Daemon]:
    """The daemons the state file records; none if it is missing or unreadable."""
    try:
        state = json.loads(state_file.read_text())
    except (OSError, ValueError):
        return []
    return [Daemon(**d) for d in state.get("daemons", [])]


def save_state(state_file: Path, config: LabConfig, daemons: list[Daemon]) -> None:
    """Replace the state file (atomically) with the lab's name, subnet, profile and ``daemons``."""
    state = {
        "prefix": config.prefix,
        "subnet": config.settings.subnet,
        "profile": str(config.source),
        "daemons": [d.to_dict() for d in daemons],
    }
    tmp = state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    tmp.replace(state_file)


def load_faults(run_dir: Path) -> list[Fault]:
    """The faults the lab whose run directory is ``run_dir`` carries (none if it has no faults file)."""
    path = run_dir / FAULTS_FILE
    try:
        return [Fault(**f) for f in json.loads(path.read_text())]
    except FileNotFoundError:
        return []
    except (ValueError, TypeError) as exc:
        raise HarnessError(f"{path} is unreadable ({exc}): run 'dnsstudy lab down' and up") from None


def faults_of_place(place: str) -> list[Fault]:
    """The faults the place a store's environment names carries now: for "lab:PREFIX", that lab's (none if it
    is down); none for any other place, which cannot be given faults."""
    kind, _, prefix = place.partition(":")
    return load_faults(RUN_ROOT / prefix) if kind == "lab" and prefix else []


def save_faults(run_dir: Path, faults: list[Fault]) -> None:
    """Replace the lab's faults file, durably: a crawl started after a crash must still see what is applied."""
    records = [{"kind": f.kind, "protocol": f.protocol, "resolver": f.resolver, "owner": f.owner} for f in faults]
    write_durably(json.dumps(records, indent=1).encode(), run_dir / FAULTS_FILE)


def lab_status(config: LabConfig, state_file: Path, ca_path: Path) -> LabStatus:
    """Namespaces, daemons (alive or dead) and resolver endpoints of the lab whose state file is ``state_file``."""
    return LabStatus(
        prefix=config.prefix,
        up=state_file.exists(),
        namespaces={role: netns.exists(name) for role, name in config.namespaces.items()},
        daemons=[
            {
                "name": d.name,
                "namespace": d.namespace,
                "pid": d.pid,
                "alive": d.alive(),
                "addresses": d.addresses,
                "log": d.log,
            }
            for d in load_daemons(state_file)
        ],
        resolvers=resolver_endpoints(config),
        run_dir=str(state_file.parent),
        ca=str(ca_path),
        faults=[{"name": f.name, "resolver": f.resolver, "owner": f.owner} for f in load_faults(state_file.parent)],
    )


def resolver_endpoints(config: LabConfig) -> list[dict]:
    """Every lab resolver with the endpoint of every protocol it serves (unbound, and dnsproxy for QUIC)."""
    plan = config.addresses
    return [
        {
            "name": r.name,
            "kind": r.kind,
            "address": plan.resolver(i),
            "tls_name": resolver_tls_name(r.name),
            DO53.name: f"{plan.resolver(i)}:{DO53.port}",
            DOT.name: f"{plan.resolver(i)}:{DOT.port}",
            DOH.name: f"https://{resolver_tls_name(r.name)}/dns-query",
            DOQ.name: f"{plan.resolver(i)}:{DOQ_PORT}",
            DOH3.name: f"https://{resolver_tls_name(r.name)}:{DOH3_PORT}/dns-query",
            "description": r.description,
        }
        for i, r in enumerate(config.settings.resolvers)
    ]
