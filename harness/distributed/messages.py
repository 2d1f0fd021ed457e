"""What the coordinator and a worker send each other: plain JSON, the only contract between them.

A task carries its study's validated configuration, so a worker needs no
store and no study file of its own: it builds its station from the message,
once per study. A result carries the visit's record and its HAR (gzip, in
base64), and the link checks its block started with.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import asdict

from harness.plan import PlannedVisit
from harness.sitelist import Site


def study_part(study_id: str, study: dict) -> dict:
    """The study as a task carries it, with a digest a worker keys its station by."""
    digest = hashlib.sha256(json.dumps(study, sort_keys=True).encode()).hexdigest()[:16]
    return {"study_id": study_id, "study": study, "digest": digest}


def visit_task_id(plan_id: str, study_id: str, visit: PlannedVisit) -> str:
    """A visit's task id: the same every time it is sent, so a coordinator that restarts finds it again.

    ``plan_id`` is the store's own (written with its plan): another store of the same study on the same broker,
    or a store made again after a change, never takes this store's tasks or results for its own.
    """
    return f"{study_id}:{plan_id}:visit:{visit.ordinal}"


def timer_task_id(plan_id: str, study_id: str, block: int) -> str:
    return f"{study_id}:{plan_id}:timer:{block}"


def matches(visit: PlannedVisit, record: dict) -> bool:
    """Whether a result's record is of this planned visit (its URL, resolver, protocol and vantage point)."""
    return (record.get("url"), record.get("resolver"), record.get("protocol"), record.get("vantage_point")) == (
        visit.url,
        visit.resolver,
        visit.protocol,
        visit.vantage_point,
    )


#: A HAR's name as a worker sends it: a visit id, nothing a path or the results' marker files could be.
HAR_NAME = re.compile(r"^[0-9a-f]{8,64}\.har(\.gz)?$")


def visit_message(study_id: str, study: dict, visit: PlannedVisit) -> dict:
    return {**study_part(study_id, study), "visit": asdict(visit)}


def visit_of(message: dict) -> PlannedVisit:
    fields = dict(message["visit"])
    return PlannedVisit(**{**fields, "site": Site(**fields["site"])})


def timer_message(study_id: str, study: dict, block: int, network: str, names: list[str]) -> dict:
    return {**study_part(study_id, study), "block": block, "network": network, "names": names}


def har_payload(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def har_bytes(payload: str) -> bytes:
    return base64.b64decode(payload.encode("ascii"))
