"""The Celery application both sides share: JSON messages, late acknowledgement, one queue per vantage point.

A visit's message is acknowledged only after its result is stored, so a
worker that dies mid-visit leaves it unacknowledged; the broker makes it
visible again after the visibility timeout, or at once when only the pool
process died, and the visit runs again. The coordinator completes results
idempotently, so a visit that ran twice is still recorded once.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from celery import Celery

from harness.distributed.broker import check_url, tls_options

#: Longer than the longest task (a visit with its retries, a block's timer run), or a task still running is
#: handed out a second time (harmless, but wasted). Deployments with long timer runs raise it.
DEFAULT_VISIBILITY_TIMEOUT_S = 3600

VISIT_TASK = "dnsstudy.visit"
TIMER_TASK = "dnsstudy.time_block"


def queue_of(vantage_point: str) -> str:
    """The queue a vantage point's worker takes its tasks from."""
    return f"dnsstudy.vp.{vantage_point}"


def make_app(broker_url: str, visibility_timeout_s: float = DEFAULT_VISIBILITY_TIMEOUT_S) -> Celery:
    """The application, bound to ``broker_url`` (also the result backend)."""
    check_url(broker_url)
    tls = tls_options(broker_url)
    if tls:  # the CA file and verification as options: both Celery's backend and kombu's transport read them there
        broker_url = urlsplit(broker_url)._replace(query="").geturl()
    app = Celery("dnsstudy", broker=broker_url, backend=broker_url, set_as_current=False)
    if tls:
        app.conf.update(broker_use_ssl=tls, redis_backend_use_ssl=tls)
    transport = {
        "visibility_timeout": visibility_timeout_s,
        # Look for lost workers' unacknowledged messages a tenth of the timeout apart, at most kombu's 100 s.
        "unacked_restore_interval": max(1, min(100, int(visibility_timeout_s // 10))),
        "unacked_restore_throttle": 1,
    }
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,  # a worker holds one visit at a time: the others stay in the queue
        worker_concurrency=1,
        task_default_queue="dnsstudy.default",
        broker_transport_options=transport,
        result_backend_transport_options=transport,
        result_expires=7 * 24 * 3600,  # the coordinator forgets a result once it is stored; this is a backstop
        result_backend_always_retry=True,  # a broker restart while a result is stored: retry, do not lose it
        result_backend_max_retries=60,
        broker_connection_retry_on_startup=True,
        # A broker restart mid-visit: the visit goes on, its result is stored and acknowledged once the broker is
        # back (the unacknowledged message is in the broker's append-only file, not in the lost connection).
        worker_cancel_long_running_tasks_on_connection_loss=False,
        broker_connection_max_retries=None,  # a week unattended: wait for the broker as long as it takes
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,  # the worker's own lines go to its terminal or log as they are
        worker_send_task_events=False,
        task_send_sent_event=False,
    )
    return app
