"""The results store: one SQLite database per crawl, the only contract between harness and analysis.

`Store` is the database (harness/store/database.py joins its parts);
docs/store.md says what lives in which module, and the schema.
"""

from harness.store.database import Store
from harness.store.records import CompletedVisit
from harness.store.schema import SCHEMA_VERSION
from harness.store.transaction import disk_full

__all__ = ["SCHEMA_VERSION", "CompletedVisit", "Store", "disk_full"]
