"""The store's HAR directory (`HarDirectory`): where its HARs are, which store owns them, and orphans removed.

HAR paths are absolute, under the results directory the store records
(`meta.results_dir`); a store found in another directory is refused until
the crawl is told it was moved (`adopt_results_dir`). `hars/.store` names
the one store a results directory's HARs belong to (`claim_hars`), so a
crawl removing the HARs no record names (`remove_orphan_hars`) never
removes another store's.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from harness.durable import fsync_directory
from harness.errors import HarnessError
from harness.store.records import select, select_one
from harness.store.transaction import Transaction


class HarDirectory:
    """The HAR side of a `Store`: its results directory, the claim on `hars/`, and the HARs its records name."""

    db: sqlite3.Connection
    path: Path

    def results_dir(self) -> Path | None:
        """The directory the store's HARs are under (`meta.results_dir`), None for a store from before it."""
        row = select_one(self.db, "SELECT value FROM meta WHERE key = 'results_dir'")
        return Path(row["value"]) if row else None

    def adopt_results_dir(self, results_dir: Path, moved: bool = False) -> int:
        """Check that the store's HARs are recorded in ``results_dir``/hars (absolute), before a crawl writes there.

        A store whose recorded directory is another one was moved or copied: refused in one line unless
        ``moved``, and then its HAR paths are rewritten to the new directory in one transaction (so are
        relative paths of stores from before `meta.results_dir`). Returns how many paths were rewritten.
        """
        results_dir = Path(os.path.realpath(results_dir))
        recorded = self.results_dir()
        if recorded == results_dir:
            return 0
        if recorded is not None and not moved:
            raise HarnessError(
                f"{self.path} holds the HARs of {recorded}, not of {results_dir}: if the results directory was "
                "moved or copied here, run the crawl again with --moved (its HAR paths are then rewritten)"
            )
        hars = results_dir / "hars"
        rows = select(self.db, "SELECT study_id, ordinal, har_path FROM visits WHERE har_path IS NOT NULL")
        if recorded is None and not moved:
            self._refuse_hars_elsewhere([row["har_path"] for row in rows], hars)
        # A HAR is always <results>/hars/<visit>.har.gz: its name says where it is now.
        changes = [
            {"har_path": str(hars / Path(row["har_path"]).name), "study_id": row["study_id"], "ordinal": row["ordinal"]}
            for row in rows
            if row["har_path"] != str(hars / Path(row["har_path"]).name)
        ]
        with Transaction(self.db):
            self.db.executemany(
                "UPDATE visits SET har_path = :har_path, record = json_set(record, '$.har_path', :har_path) "
                "WHERE study_id = :study_id AND ordinal = :ordinal",
                changes,
            )
            self.db.execute(
                "INSERT OR REPLACE INTO meta VALUES ('results_dir', :results_dir)", {"results_dir": str(results_dir)}
            )
        return len(changes)

    def _refuse_hars_elsewhere(self, har_paths: list[str], hars: Path) -> None:
        """A store from before `meta.results_dir`: its absolute HAR paths must already be in ``hars``.

        Relative ones (a crawl given a relative --store) were relative to a working directory nobody remembers,
        and are taken as being here.
        """
        elsewhere = [p for p in har_paths if Path(p).is_absolute() and os.path.realpath(Path(p).parent) != str(hars)]
        if elsewhere:
            raise HarnessError(
                f"{self.path} holds HARs in {Path(elsewhere[0]).parent}, not in {hars}: if the results "
                "directory was moved or copied here, run the crawl again with --moved"
            )

    def claim_hars(self, hars: Path, moved: bool = False) -> None:
        """One store per results directory: `hars/.store` names the store whose HARs these are.

        Refused (one line) when another store that still exists claimed it, unless the user says the
        results were ``moved`` here. Call it before a plan is written: a refused store stays as it was.
        """
        hars.mkdir(parents=True, exist_ok=True)
        fsync_directory(hars.parent)  # hars/ itself must survive a power cut before a record names a HAR in it
        marker, mine = hars / ".store", str(os.path.realpath(self.path))
        try:
            owner = marker.read_text().strip()
        except FileNotFoundError:
            owner = ""
        if owner and owner != mine and Path(owner).exists() and not moved:
            raise HarnessError(
                f"{hars} holds the HARs of another store, {owner}: give this store a directory of its own"
            )
        if owner != mine:
            marker.write_text(mine + "\n")

    def referenced_hars(self) -> set[str]:
        """HAR paths of done visits: any other HAR file in the results is an orphan of a killed visit."""
        return {row["har_path"] for row in select(self.db, "SELECT har_path FROM visits WHERE har_path IS NOT NULL")}

    def remove_orphan_hars(self, hars: Path) -> int:
        """Remove what killed visits left in ``hars``: HARs no done visit names, and .part files; how many.

        `claim_hars` must have claimed the directory: another store's HARs there would all look like orphans.
        """
        referenced = self.referenced_hars()
        removed = 0
        for path in hars.iterdir():
            if path.name.endswith(".part") or (path.name.endswith((".har", ".har.gz")) and str(path) not in referenced):
                path.unlink(missing_ok=True)
                removed += 1
        return removed
