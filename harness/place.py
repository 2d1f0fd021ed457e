"""`Place`: where visits, timers and shaping run — the lab, or an Internet side.

Every place has the same shape on the client's side:

    client  --c0 ==== sc--  shaper  --ss ==== ...  the servers (lab) or the host's uplink (Internet)
    (browser, stubs,        (forwards; shaping
     timer)                  attaches here)

so the browser, the arms, the timer and the shaper work the same way in
both. What differs (where resolvers come from, whether a probe peer exists
for link checks, how to bring it up) is behind this interface; nothing
outside `harness/lab/` and `harness/internet/` asks which one it has.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal, Protocol
from urllib.parse import urlsplit

from harness import netns, protocols
from harness.errors import HarnessError
from harness.replay.events import ReplayEvents, ReplayWindow

if TYPE_CHECKING:
    from harness.lab.querylog import Reply

# Interface names, the same in every place: they live inside the place's namespaces,
# so two places never collide on them.
CLIENT_IF = "c0"  # the client's end of the client-shaper link
SHAPER_CLIENT_IF = "sc"  # the shaper's end towards the client: downlink egress
SHAPER_SERVER_IF = "ss"  # the shaper's end towards the servers or the uplink: uplink egress


@dataclass(frozen=True)
class Resolver:
    """One resolver and its endpoints for every transport."""

    name: str
    address: str  # Do53 and DoT address (and DoH bootstrap)
    tls_name: str  # name its certificate carries (DoT authentication, DoH host)
    doh_uri: str
    control_config: Path | None = None  # a lab resolver's unbound config: its statistics prove transports
    doq_port: int | None = None  # DNS over QUIC (RFC 9250) on `address`, if served
    doh3_uri: str | None = None  # DNS over HTTP/3, if served

    def port(self, protocol: protocols.Protocol) -> int:
        """Where this resolver serves ``protocol``: the port its endpoint names, else the standard one."""
        named = {
            "doh": urlsplit(self.doh_uri).port,
            "doq": self.doq_port,
            "doh3": urlsplit(self.doh3_uri).port if self.doh3_uri else None,
        }
        return named.get(protocol.name) or protocol.port


@dataclass(frozen=True)
class Fault:
    """A fault a place carries at one of its resolvers (the lab's, harness/lab/faults.py): on one protocol's
    path, or, with no protocol, in the resolver's certificate, which every encrypted protocol meets.

    Two faults are the same fault whoever applied them: ``owner`` says who did, for the person reading.
    """

    kind: str
    protocol: str | None
    resolver: str
    owner: str = field(default="", compare=False)  # "by hand", "by the crawl of study X", ...

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.protocol}" if self.protocol else self.kind

    def describe(self) -> str:
        """'drop:dot at resolver near, applied by hand'."""
        return f"{self.name} at resolver {self.resolver}" + (f", applied {self.owner}" if self.owner else "")

    def touches(self, resolver: str, protocol: str) -> bool:
        """Whether a visit to ``resolver`` over ``protocol`` meets this fault."""
        if resolver != self.resolver:
            return False
        if self.protocol:
            return protocol == self.protocol
        return any(p.name == protocol and p.encrypted for p in protocols.protocols())


@dataclass(frozen=True)
class ClientSide:
    """Where the browser runs: the lab's client namespace, or the Internet side's."""

    namespace: str
    run_dir: Path  # per-lab run-time directory (stub configs, logs)
    ca_file: Path  # the CA that signs resolver certificates
    dead_resolver: str  # an address where no DNS server answers
    browser_trusts_ca: bool = True  # import ca_file into Firefox (a lab CA); False: Firefox's own roots
    system_resolver: str | None = None  # the namespace's resolver between visits (None: the host's resolv.conf)
    # The hosts whose certificates ca_file signs over QUIC (a lab web with HTTP/3): a browser that trusts ca_file
    # and refuses an unknown root over QUIC is told to allow it for them (harness/browser/chromium_quic.py)
    quic_ca_hosts: tuple[str, ...] = ()
    web_http3: bool = False  # the place's web may answer over HTTP/3 (a lab web with `http3`; the Internet's does)

    def set_system_resolver(self, address: str) -> None:
        """Point the namespace's resolv.conf at ``address`` (`ip netns exec` bind-mounts it)."""
        self._write_resolv_conf(f"# written by dnsstudy for the visit's DNS arm\nnameserver {address}\n")

    def nameservers(self) -> list[str]:
        """The name servers the namespace's resolv.conf names now (none if it has none of its own)."""
        try:
            text = (netns.ETC_NETNS / self.namespace / "resolv.conf").read_text()
        except OSError:
            return []
        lines = [line.split() for line in text.splitlines()]
        return [words[1] for words in lines if len(words) > 1 and words[0] == "nameserver"]

    def restore_system_resolver(self) -> None:
        """Undo the arms' resolv.conf: after a visit (or a killed crawl) the namespace resolves as it did before."""
        if self.system_resolver is None:
            (netns.ETC_NETNS / self.namespace / "resolv.conf").unlink(missing_ok=True)
        else:
            self._write_resolv_conf(f"# written by dnsstudy lab\nnameserver {self.system_resolver}\n")

    def _write_resolv_conf(self, text: str) -> None:
        etc = netns.ETC_NETNS / self.namespace
        etc.mkdir(parents=True, exist_ok=True)
        if (etc / "resolv.conf").is_file():
            # In place: a browser serving many visits sees the file `ip netns exec` bind-mounted at its start,
            # this inode, and glibc reads it again when its mtime changes; a renamed new file it would never see.
            with open(etc / "resolv.conf", "r+") as f:
                f.write(text)
                f.truncate()
            return
        tmp = etc / "resolv.conf.tmp"
        tmp.write_text(text)
        tmp.replace(etc / "resolv.conf")


PlaceKind = Literal["lab", "internet"]


class PlaceStatus(Protocol):
    """What a place reports about itself."""

    up: bool
    namespaces: dict[str, bool]

    @property
    def healthy(self) -> bool: ...

    @property
    def dead(self) -> list[str]: ...


@dataclass(frozen=True)
class ProbePeer:
    """Where a link check's echo and rate receiver run: a namespace beyond the shaper, and its address."""

    client_namespace: str
    server_namespace: str
    address: str


class Place(ABC):
    """Where visits, timers and shaping run."""

    kind: ClassVar[PlaceKind]  # which studies run here (a study's `target`)
    name: str  # the prefix of its namespaces
    run_dir: Path  # run-time state: shaping, stubs, visit work directories

    @property
    @abstractmethod
    def namespaces(self) -> dict[str, str]:
        """Role (client, shaper, and server where there is one) -> namespace name."""

    @abstractmethod
    def status(self) -> PlaceStatus:
        """Whether the place is up, and which of its parts have died."""

    @abstractmethod
    def client_side(self) -> ClientSide:
        """The client namespace as a place for arms, browser and timer."""

    @abstractmethod
    def resolver(self, name: str) -> Resolver:
        """A resolver this place can reach, by name (HarnessError naming what exists if unknown)."""

    @abstractmethod
    def resolver_names(self) -> list[str] | None:
        """The resolvers this place has, or None when any resolver profile will do."""

    @abstractmethod
    def link_ends(self) -> list[tuple[str, str]]:
        """(namespace, interface) of every end of the shaped link: offloads are turned off there."""

    @abstractmethod
    def probe_peer(self) -> ProbePeer | None:
        """A peer for measured link checks, or None where the place has none (the Internet)."""

    @abstractmethod
    def describe(self) -> dict[str, str]:
        """What a crawl records about the place in its environment."""

    @property
    @abstractmethod
    def up_command(self) -> str:
        """The command that brings this place up, for error messages."""

    @abstractmethod
    def bring_up(self) -> bool:
        """Bring the place up from what it already knows (`worker --up`); False if it was up already.

        A place that needs more than that (an Internet side needs its interface) raises a one-line HarnessError.
        """

    def served_sites(self) -> set[str] | None:
        """The sites this place's web serves, or None where any site may be visited (the Internet)."""
        return None

    def page_url(self, site: str, planned: str) -> str:
        """The URL a visit to ``site`` loads: the ``planned`` one, unless the place's web recorded the site's
        page at another (a replayed `http://` or `www.` page, docs/replay.md)."""
        return planned

    def apply_faults(self, pairs: list[tuple[str, str]], owner: str) -> None:
        """Apply (fault name, resolver) pairs, recorded as applied by ``owner`` ("by the crawl of study X");
        only the lab can break itself on purpose."""
        if pairs:
            raise HarnessError(f"the {self.kind} cannot apply lab faults")

    def clear_faults(self) -> None:  # noqa: B027 -- nothing to undo where nothing can be applied
        """Undo every fault the place carries."""

    def active_faults(self) -> list[Fault]:
        """The faults the place carries now, as its state records them (none where none can be applied)."""
        return []

    def replay_window(self) -> ReplayWindow | None:
        """Open a window on what its web replays from now (for `replay_events`), or None where the place replays
        no archive (docs/replay.md)."""
        return None

    def replay_events(self, window: ReplayWindow) -> ReplayEvents:
        """What its web replayed since ``window`` opened: misses, fuzzy matches, errors, filled bodies, and
        the names its DNS did not hold."""
        return ReplayEvents()

    def dns_window(self) -> dict[Path, int] | None:
        """Open a window on the replies its resolvers log from now (for `dns_replies`), or None where the place
        keeps no log of its resolvers' replies (the Internet side's resolvers are not its own)."""
        return None

    def dns_replies(self, window: dict[Path, int]) -> list[Reply]:
        """The replies for a page's names its resolvers logged since ``window`` opened."""
        return []

    def ech_window(self) -> int | None:
        """Open a window on the web's log of connections and their Encrypted Client Hello (for `ech_hosts`), or
        None where the place's web has no ECH of its own (harness/lab/ech.py)."""
        return None

    def ech_hosts(self, window: int) -> dict[str, bool]:
        """Per server name of the connections since ``window`` opened: whether one accepted ECH."""
        return {}

    def https_record_owners(self, resolver: str) -> frozenset[str] | None:
        """The names ``resolver`` answers with an HTTPS record (RFC 9460), or None where the zones are not the
        place's own."""
        return None

    def faults_touching(self, resolver: str, protocol: str) -> list[str]:
        """The names of the faults a visit to ``resolver`` over ``protocol`` meets now (what its record keeps)."""
        return [f.name for f in self.active_faults() if f.touches(resolver, protocol)]

    @property
    def clear_faults_command(self) -> str:
        """The command that clears the place's faults, for error messages (a place that has faults says it)."""
        return ""

    def refuse_faults(self, foreign: list[Fault], why: str) -> None:
        """One line naming the first of ``foreign`` (faults the caller did not apply), ``why`` it cannot run
        beside them, and the command that clears them; nothing if there are none."""
        if foreign:
            more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
            raise HarnessError(
                f"{self.kind} '{self.name}' carries fault {foreign[0].describe()}{more}, {why}: "
                f"clear it with '{self.clear_faults_command}'"
            )

    def require_healthy(self) -> None:
        """Raise a one-line HarnessError unless the place is up and healthy."""
        status = self.status()
        if not status.healthy:
            dead = f" (dead: {', '.join(status.dead)})" if status.dead else ""
            raise HarnessError(f"{self.kind} '{self.name}' is not up and healthy{dead}: run '{self.up_command}'")

    def require_up(self) -> None:
        """Raise a one-line HarnessError unless the place is up (dead parts allowed)."""
        if not self.status().up:
            raise HarnessError(f"{self.kind} '{self.name}' is not up: run '{self.up_command}'")
