"""The byte-cost model: bytes a client sends to resolve r names, per protocol (profiles/analysis/byte-cost.toml)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from analysis.settings import PROFILE_DIR

DEFAULT_MODEL = PROFILE_DIR / "byte-cost.toml"
#: The protocols `client_bytes` has a model for, in the order the figure draws them.
MODELLED = ("do53", "dot", "doh")


def load_sizes(path: Path = DEFAULT_MODEL) -> dict[str, int]:
    try:
        return {k: int(v) for k, v in tomllib.loads(path.read_text())["sizes"].items()}
    except (OSError, KeyError, ValueError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{path}: not a byte-cost model ({exc})") from None


def client_bytes(protocol: str, queries: int, s: dict[str, int]) -> int:
    """Bytes on the wire (IP and up) the client sends for ``queries`` queries over one connection."""
    segment = s["ip"] + s["tcp"]
    if protocol == "do53":
        return queries * (s["ip"] + s["udp"] + s["dns_query"])
    handshake = (
        (s["ip"] + s["tcp_syn"])
        + s["acks_per_handshake"] * segment
        + (segment + s["client_hello"])
        + (segment + s["client_finished"])
    )
    ack = s["acks_per_query"] * segment
    if protocol == "dot":
        return handshake + queries * (segment + s["tls_record"] + s["dot_length_prefix"] + s["dns_query"] + ack)
    if protocol == "doh":
        setup = (
            segment
            + s["tls_record"]
            + s["h2_preface"]
            + s["h2_settings"]
            + s["h2_window_update"]
            + s["h2_settings_ack"]
        )
        first = s["hpack_first_headers"] - s["hpack_next_headers"]
        per_query = segment + s["tls_record"] + 2 * s["h2_frame"] + s["hpack_next_headers"] + s["dns_query"] + ack
        return handshake + setup + first + queries * per_query
    raise ValueError(f"no byte-cost model for protocol '{protocol}'")
