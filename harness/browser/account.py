"""The unprivileged account the browser and geckodriver run as."""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError

#: Created by scripts/setup.sh (useradd --system). Never root: pages run as this user.
BROWSER_USER = os.environ.get("DNSSTUDY_BROWSER_USER", "dnsstudy-browser")


@dataclass(frozen=True)
class BrowserAccount:
    name: str
    uid: int
    gid: int
    home: Path

    @classmethod
    def lookup(cls, name: str = BROWSER_USER) -> BrowserAccount:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise HarnessError(
                f"user '{name}' does not exist: run scripts/setup.sh (the browser never runs as root)"
            ) from None
        if entry.pw_uid == 0:
            raise HarnessError(f"user '{name}' has uid 0: the browser must run unprivileged")
        return cls(name, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir))

    def setpriv(self, argv: list[str]) -> list[str]:
        """argv that runs ``argv`` as this account, with no supplementary groups."""
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--", *argv]

    def give(self, path: Path) -> None:
        """Hand a directory tree to this account."""
        os.chown(path, self.uid, self.gid)
        for root, dirs, files in os.walk(path):
            for name in dirs + files:
                os.lchown(os.path.join(root, name), self.uid, self.gid)

    def environment(self, tmpdir: Path) -> dict[str, str]:
        """A minimal environment: nothing of ours (proxies, DISPLAY, ...) leaks to the browser."""
        return {
            "HOME": str(self.home),
            "USER": self.name,
            "PATH": "/usr/bin:/bin",
            "TMPDIR": str(tmpdir),
            "LANG": "C.UTF-8",
            # Release builds ignore services.settings.server without it (see profiles/firefox/).
            "MOZ_REMOTE_SETTINGS_DEVTOOLS": "1",
            "MOZ_CRASHREPORTER_DISABLE": "1",
        }
