"""What the crawl reads back from its store (`PlanQueries`): the next visits, progress, blocks to time, visit times.

The single-host crawl and the coordinator take their next visits from here
in plan order, and resume from it: what is `planned` is still to do.
"""

from __future__ import annotations

import json
import sqlite3

from harness.plan import PlannedVisit
from harness.sitelist import Site
from harness.store.records import (
    NetworkBlock,
    PlanEnd,
    PlanEntry,
    RecentVisit,
    SuccessCount,
    VisitCounts,
    select,
    select_one,
)
from harness.store.schema import PLAN_COLUMNS

_PLANNED = f"SELECT {', '.join(PLAN_COLUMNS)} FROM visits"


def planned_visit_of(row: sqlite3.Row) -> PlannedVisit:
    """The planned visit a `visits` row holds (it has the `PLAN_COLUMNS`)."""
    return PlannedVisit(
        ordinal=row["ordinal"],
        round=row["round"],
        block=row["block"],
        network=row["network"],
        site=Site(domain=row["site"], rank=row["rank"], group=row["site_group"]),
        resolver=row["resolver"],
        protocol=row["protocol"],
        vantage_point=row["vantage_point"],
        browser=row["browser"],
    )


class PlanQueries:
    """The crawl's reads of a `Store`: its plan, what is done of it, and its blocks."""

    db: sqlite3.Connection

    def study_config(self, study_id: str) -> dict | None:
        """The study's configuration as stored with its plan (None if the store has no such study)."""
        row = select_one(self.db, "SELECT config FROM studies WHERE study_id = :study_id", study_id=study_id)
        return json.loads(row["config"]) if row else None

    def study_started_at(self, study_id: str) -> float | None:
        """When the study's crawl first started (Unix time), or None if it never did; read only."""
        row = select_one(self.db, "SELECT started_at FROM studies WHERE study_id = :study_id", study_id=study_id)
        return row["started_at"] if row else None

    def next_planned(self, study_id: str) -> PlannedVisit | None:
        """The first visit not yet done, in plan order."""
        row = select_one(
            self.db,
            f"{_PLANNED} WHERE study_id = :study_id AND status = 'planned' ORDER BY ordinal LIMIT 1",
            study_id=study_id,
        )
        return None if row is None else planned_visit_of(row)

    def planned_at(self, study_id: str, vantage_point: str, limit: int) -> list[PlannedVisit]:
        """The first ``limit`` visits a vantage point has not done, in plan order."""
        rows = select(
            self.db,
            f"{_PLANNED} WHERE study_id = :study_id AND vantage_point = :vantage_point AND status = 'planned' "
            "ORDER BY ordinal LIMIT :limit",
            study_id=study_id,
            vantage_point=vantage_point,
            limit=limit,
        )
        return [planned_visit_of(row) for row in rows]

    def planned_visit(self, study_id: str, ordinal: int) -> PlanEntry | None:
        """A visit of the plan by ordinal, and whether it is done (None if the plan has no such visit)."""
        row = select_one(
            self.db,
            f"SELECT {', '.join(PLAN_COLUMNS)}, status FROM visits WHERE study_id = :study_id AND ordinal = :ordinal",
            study_id=study_id,
            ordinal=ordinal,
        )
        return None if row is None else PlanEntry(planned_visit_of(row), row["status"] == "done")

    def plan_end(self, study_id: str) -> PlanEnd:
        """The next free ordinal and block: where a vantage point added mid-study starts its part."""
        row = select_one(
            self.db,
            "SELECT MAX(ordinal) AS ordinal, MAX(block) AS block FROM visits WHERE study_id = :study_id",
            study_id=study_id,
        )
        assert row is not None  # an aggregate has a row
        last_ordinal, last_block = row["ordinal"], row["block"]
        return PlanEnd(
            (-1 if last_ordinal is None else last_ordinal) + 1, (-1 if last_block is None else last_block) + 1
        )

    def progress(self, study_id: str) -> VisitCounts:
        """Visits done, and planned in all."""
        row = select_one(
            self.db,
            "SELECT SUM(status = 'done') AS done, COUNT(*) AS total FROM visits WHERE study_id = :study_id",
            study_id=study_id,
        )
        assert row is not None  # an aggregate has a row
        return VisitCounts(row["done"] or 0, row["total"])

    def vantage_points(self, study_id: str) -> dict[str, VisitCounts]:
        """Visits done, and planned in all, per vantage point, in plan order."""
        rows = select(
            self.db,
            "SELECT vantage_point, SUM(status = 'done') AS done, COUNT(*) AS total FROM visits "
            "WHERE study_id = :study_id GROUP BY vantage_point ORDER BY MIN(ordinal)",
            study_id=study_id,
        )
        return {row["vantage_point"]: VisitCounts(row["done"] or 0, row["total"]) for row in rows}

    def planned_by_round(self, study_id: str) -> dict[int, int]:
        """Visits still planned, per round."""
        rows = select(
            self.db,
            "SELECT round, COUNT(*) AS planned FROM visits WHERE study_id = :study_id AND status = 'planned' "
            "GROUP BY round",
            study_id=study_id,
        )
        return {row["round"]: row["planned"] for row in rows}

    def recent_visits(self, study_id: str, limit: int) -> list[RecentVisit]:
        """The last ``limit`` done visits' starts and wall times, newest first (the index walks them in order)."""
        rows = select(
            self.db,
            "SELECT started_at, json_extract(record, '$.wall_s') AS wall_s FROM visits "
            "WHERE study_id = :study_id AND status = 'done' ORDER BY ordinal DESC LIMIT :limit",
            study_id=study_id,
            limit=limit,
        )
        return [RecentVisit(row["started_at"], row["wall_s"]) for row in rows]

    def success_by_configuration(self, study_id: str) -> dict[tuple[str, str], SuccessCount]:
        """Successful and counted visits per (resolver, protocol) so far."""
        rows = select(
            self.db,
            "SELECT resolver, protocol, SUM(error_class = 'Successful') AS successful, SUM(counted) AS counted "
            "FROM visits WHERE study_id = :study_id AND status = 'done' GROUP BY resolver, protocol",
            study_id=study_id,
        )
        return {
            (row["resolver"], row["protocol"]): SuccessCount(row["successful"] or 0, row["counted"] or 0)
            for row in rows
        }

    def visit_seconds(self, study_id: str | None = None) -> dict[str, list[float]]:
        """Wall time of every done visit, per network (from this study, or from every study in the store)."""
        rows = select(
            self.db,
            "SELECT network, json_extract(record, '$.wall_s') AS wall_s FROM visits WHERE status = 'done' "
            "AND (:study_id IS NULL OR study_id = :study_id)",
            study_id=study_id,
        )
        times: dict[str, list[float]] = {}
        for row in rows:
            if row["wall_s"] is not None:
                times.setdefault(row["network"], []).append(float(row["wall_s"]))
        return times

    # -- network blocks and their timer runs ------------------------------------------------------------------

    def block_timed(self, study_id: str, block: int) -> bool:
        """Whether the block's timer run is stored."""
        sql = "SELECT 1 FROM blocks WHERE study_id = :study_id AND block = :block"
        return select_one(self.db, sql, study_id=study_id, block=block) is not None

    def untimed_blocks(self, study_id: str, vantage_point: str | None = None) -> list[NetworkBlock]:
        """Blocks whose visits are all done but whose timer run is not stored, in plan order.

        ``vantage_point``: only that vantage point's blocks.
        """
        rows = select(
            self.db,
            "SELECT block, MIN(network) AS network FROM visits WHERE study_id = :study_id "
            "AND (:vantage_point IS NULL OR vantage_point = :vantage_point) GROUP BY block "
            "HAVING SUM(status = 'planned') = 0 AND block NOT IN (SELECT block FROM blocks WHERE study_id = :study_id) "
            "ORDER BY block",
            study_id=study_id,
            vantage_point=vantage_point,
        )
        return [NetworkBlock(row["block"], row["network"]) for row in rows]

    def block_hars(self, study_id: str, block: int) -> list[str]:
        """The HAR paths of a block's done visits, in plan order: what its timer run reads."""
        rows = select(
            self.db,
            "SELECT har_path FROM visits WHERE study_id = :study_id AND block = :block AND har_path IS NOT NULL "
            "ORDER BY ordinal",
            study_id=study_id,
            block=block,
        )
        return [row["har_path"] for row in rows]
