"""The lab's state file and `LabStatus`, what `lab status` reports from it.

The state file (/run/dnsstudy/<prefix>/state.json) lists every daemon with
its pid and start time. Its existence is what makes a lab up: `lab up`
writes it (empty) before it makes anything, and `lab down` removes it last.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from harness import netns
from harness.daemons import Daemon
from harness.lab.config import LabConfig
from harness.lab.unbound import DOH3_PORT, DOQ_PORT
from harness.lab.zones import resolver_tls_name
from harness.protocols import DO53, DOH, DOH3, DOQ, DOT


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
