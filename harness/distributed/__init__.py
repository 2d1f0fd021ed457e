"""Crawls across vantage points: a coordinator, the store's only writer, and a worker at each vantage point.

`broker.py` runs and checks the Redis they talk through; `app.py` is the Celery
application (JSON messages, late acknowledgement, one queue per vantage point);
`worker.py` runs a vantage point's visits and timer runs on its place;
`coordinator.py` plans, queues and records. See docs/distributed.md.
"""
