"""`Store`: one crawl's results database, opened for a crawl or read-only, its parts joined in one object.

The parts live in their own modules: the schema and opening a connection
(schema.py), the one transaction type (transaction.py), the writes
(writer.py), the HAR directory (hars.py), the crawl's reads
(plan_queries.py) and the reports' reads (status_queries.py).
"""

from __future__ import annotations

from pathlib import Path

from harness.store.hars import HarDirectory
from harness.store.plan_queries import PlanQueries
from harness.store.schema import open_read_only, open_read_write
from harness.store.status_queries import StatusQueries
from harness.store.transaction import Transaction
from harness.store.writer import StoreWriter


class Store(StoreWriter, HarDirectory, PlanQueries, StatusQueries):
    """One crawl's database: the only contract between harness and analysis (docs/store.md)."""

    def __init__(self, path: Path):
        """Open the store at ``path`` for a crawl, creating it if there is none (`schema.open_read_write`)."""
        self.path = Path(path)
        self.db = open_read_write(self.path)

    @classmethod
    def read_only(cls, path: Path) -> Store:
        """Open an existing store for reading only, without disturbing a crawl writing it (`schema.open_read_only`)."""
        store = cls.__new__(cls)
        store.path = Path(path)
        store.db = open_read_only(store.path)
        return store

    def transaction(self) -> Transaction:
        """The store's one transaction type, for writes of one's own (tests, benchmarks): all of them or none."""
        return Transaction(self.db)

    def close(self) -> None:
        """Close the connection (a transaction still open is rolled back)."""
        self.db.close()
