"""Size-bounded daemon logs (harness/logs.py): copy-truncate keeps an O_APPEND writer writing at the start."""

from __future__ import annotations

import os

from harness.logs import bound_logs, used_bytes


def test_a_log_over_the_limit_is_copied_and_truncated_and_its_appending_writer_goes_on_at_the_start(tmp_path):
    log, small = tmp_path / "resolver-near.log", tmp_path / "nginx-error.log"
    small.write_bytes(b"x" * 10)
    writer = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.write(writer, b"q" * 2000)
        assert bound_logs(tmp_path, limit=1000) == [log]
        assert (tmp_path / "resolver-near.log.1").read_bytes() == b"q" * 2000
        os.write(writer, b"after")
    finally:
        os.close(writer)
    assert log.read_bytes() == b"after"  # no hole: the writer appends at the new end
    assert small.read_bytes() == b"x" * 10 and bound_logs(tmp_path, limit=1000) == []
    assert used_bytes(tmp_path) > 0


def test_a_missing_directory_has_nothing_to_bound(tmp_path):
    assert bound_logs(tmp_path / "absent") == []
