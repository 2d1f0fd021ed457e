"""A worker halting while the broker is down too: the visit stays the queue's, it never fails for good.

Found by the chaos run (benchmarks/chaos.py): a visit halted by a dead lab daemon while the broker had
been killed; writing the halt's reason to the broker raised a connection error out of the task, Celery
recorded the visit as failed, and the coordinator stopped the vantage point ("visit 6 failed on the
worker: Error 111 connecting to 127.0.0.1:16096").
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import pytest
import redis
from celery.exceptions import Reject
from celery.worker import state as worker_state

from harness.distributed.app import TIMER_TASK, VISIT_TASK
from harness.distributed.worker import _register_tasks
from harness.errors import HarnessError


class DownClient:
    """A broker connection whose every write fails, as with the server killed."""

    def __init__(self) -> None:
        self.writes = 0

    def set(self, key: str, value: str) -> None:
        self.writes += 1
        raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:16096. Connection refused.")


class App:
    """The part of a Celery app `_register_tasks` uses: the task decorator and the backend's client."""

    def __init__(self, client: object) -> None:
        self.tasks: dict[str, Callable[[dict], dict]] = {}
        self.backend = SimpleNamespace(client=client)

    def task(self, name: str) -> Callable[[Callable[[dict], dict]], Callable[[dict], dict]]:
        def register(function: Callable[[dict], dict]) -> Callable[[dict], dict]:
            self.tasks[name] = function
            return function

        return register


def halting_worker() -> SimpleNamespace:
    def dead_lab(_message: dict) -> dict:
        raise HarnessError("dsh2: daemons died (auth)")

    return SimpleNamespace(vantage_point="chaos", halted=None, visit=dead_lab, time_block=dead_lab)


@pytest.mark.parametrize("task", [VISIT_TASK, TIMER_TASK])
def test_a_halt_with_the_broker_down_still_requeues_the_task_and_stops_the_worker(task, monkeypatch):
    monkeypatch.setattr(worker_state, "should_stop", None)
    client, worker = DownClient(), halting_worker()
    app = App(client)
    _register_tasks(app, worker)  # type: ignore[arg-type]
    with pytest.raises(Reject) as rejected:
        app.tasks[task]({})
    assert rejected.value.requeue is True
    assert client.writes == 1  # it tried to leave the reason for the coordinator
    assert worker.halted == "dsh2: daemons died (auth)" and worker_state.should_stop == 2
