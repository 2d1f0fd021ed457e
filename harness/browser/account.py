"""The unprivileged account the browser and its driver (geckodriver) run as."""

from __future__ import annotations

import os
from pathlib import Path

from harness.accounts import Account

#: Created by scripts/setup.sh (useradd --system). Never root: pages run as this user.
BROWSER_USER = os.environ.get("DNSSTUDY_BROWSER_USER", "dnsstudy-browser")


class BrowserAccount(Account):
    """The account the browser and its driver run as."""

    @classmethod
    def lookup(cls, name: str = BROWSER_USER) -> BrowserAccount:
        account = Account.lookup(name)
        return cls(account.name, account.uid, account.gid, account.home)

    def setpriv(self, argv: list[str]) -> list[str]:
        """argv that runs ``argv`` as this account: no groups, no new privileges, no capabilities."""
        return self.run_as(argv)

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
