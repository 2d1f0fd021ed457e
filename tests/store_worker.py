"""A stand-in crawl loop for the resume test: takes the next planned visit, writes its HAR, records it.

Run as `python tests/store_worker.py STORE STUDY HARDIR`; the test kills it with SIGKILL at random moments.
"""

from __future__ import annotations

import gzip
import json
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run by path: the project on the path
from harness.store import Store  # noqa: E402


def main() -> None:
    store, study, hars = Store(Path(sys.argv[1])), sys.argv[2], Path(sys.argv[3])
    hars.mkdir(parents=True, exist_ok=True)
    while (visit := store.next_planned(study)) is not None:
        visit_id = uuid.uuid4().hex
        har = hars / f"{visit_id}.har.gz"
        part = har.with_name(har.name + ".part")
        with gzip.open(part, "wt") as f:
            json.dump({"log": {"pages": [{"title": visit.url}], "entries": []}}, f)
        part.replace(har)
        store.complete(
            study,
            visit,
            {
                "visit_id": visit_id,
                "started_at": "t",
                "error_class": "Successful",
                "detail": "",
                "paper_2019": "Successful",
                "counted": True,
                "on_load_ms": float(visit.ordinal),
                "har_path": str(har),
            },
        )


if __name__ == "__main__":
    main()
