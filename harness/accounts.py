"""The unprivileged system accounts the project runs untrusted work as (docs/security.md).

Root keeps what needs it: namespaces, nftables, tc, and starting things.
Everything that touches the network or parses data from it runs as an
account of its own, with no new privileges, no capabilities beyond the one
it needs (binding a port below 1024, or NFQUEUE), and no supplementary
groups: the browser as `dnsstudy-browser`, the helpers (Stubby, dnsproxy,
the timers, the delayer, tcpdump, the tarpit) as `dnsstudy-helper`. Both
are made by scripts/setup.sh.
"""

from __future__ import annotations

import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError

#: The helpers' account; overridable for installs that name it otherwise.
HELPER_USER = os.environ.get("DNSSTUDY_HELPER_USER", "dnsstudy-helper")
#: Capabilities a helper may keep, by what it needs them for.
BIND_LOW_PORT = "net_bind_service"  # Stubby on 127.0.0.1:53, the tarpit on 53/80/443/853
NFQUEUE = "net_admin"  # the delayer reads and reinjects the packets it holds


@dataclass(frozen=True)
class Account:
    """A system account, never uid 0."""

    name: str
    uid: int
    gid: int
    home: Path

    @classmethod
    def lookup(cls, name: str) -> Account:
        """The account ``name``; a one-line error if it is missing or is root."""
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise HarnessError(
                f"user '{name}' does not exist: run scripts/setup.sh (it runs untrusted work unprivileged)"
            ) from None
        if entry.pw_uid == 0:
            raise HarnessError(f"user '{name}' has uid 0: it must be an unprivileged account")
        return cls(name, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir))

    def run_as(self, argv: list[str], keep: tuple[str, ...] = ()) -> list[str]:
        """argv that runs ``argv`` as this account: no new privileges, no groups, only the capabilities ``keep``."""
        caps = "-all" + "".join(f",+{c}" for c in keep)
        ambient = ["--ambient-caps", caps] if keep else []
        return [
            "setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            "--no-new-privs",
            "--inh-caps",
            caps,
            *ambient,
            "--bounding-set",
            caps,
            "--",
            *argv,
        ]

    def give(self, path: Path) -> None:
        """Hand a directory tree to this account (links are changed, never followed)."""
        os.lchown(path, self.uid, self.gid)
        for root, dirs, files in os.walk(path):
            for name in dirs + files:
                os.lchown(os.path.join(root, name), self.uid, self.gid)

    def program(self, path: str | Path) -> str:
        """``path`` resolved, once checked that this account can run it (every directory on the way searchable)."""
        real = Path(path).resolve()
        for node in [*reversed(real.parents), real]:
            mode = node.stat().st_mode
            wanted = stat.S_IXOTH | (stat.S_IROTH if node == real else 0)
            if mode & wanted != wanted:
                raise HarnessError(
                    f"{real} is not runnable by the account '{self.name}' ({node} is closed to it): "
                    "run scripts/setup.sh, which installs the helpers under /opt/dnsstudy"
                )
        return str(real)


def helper() -> Account:
    """The account helpers run as."""
    return Account.lookup(HELPER_USER)


def helper_dir(run_dir: Path) -> Path:
    """A directory in ``run_dir`` the helpers may write (statistics files), made and handed over once."""
    path = run_dir / "helpers"
    path.mkdir(mode=0o755, exist_ok=True)
    account = helper()
    if path.lstat().st_uid != account.uid:
        account.give(path)
    return path
