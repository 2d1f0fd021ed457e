"""A WebDriver BiDi event log: one websocket, subscribed before navigation, read on a thread.

Chromium's visits subscribe to the network and navigation events; Firefox's to
the navigation events only: its network events come from a DevTools observer
that doubled the lab's onLoad, and the harness records Firefox's requests itself
(harness/browser/scripts/watch-network.js).

We speak BiDi over a raw websocket: Selenium's own BiDi helper stalled
quit() for about 10 s in 3 of 15 probe visits; this did not in 39.
"""

from __future__ import annotations

import json
import threading
import time

import websocket

NETWORK_EVENTS = (
    "network.beforeRequestSent",
    "network.responseStarted",
    "network.responseCompleted",
    "network.fetchError",
)
NAVIGATION_EVENTS = (
    "browsingContext.navigationStarted",
    "browsingContext.domContentLoaded",
    "browsingContext.load",
)
EVENTS = NETWORK_EVENTS + NAVIGATION_EVENTS


class BidiEventLog:
    """Collects BiDi events (``names``, by default every one the HAR needs) from ``url`` until closed."""

    def __init__(self, url: str, timeout: float = 10.0, names: tuple[str, ...] = EVENTS):
        # Firefox refuses websocket upgrades that carry an Origin header.
        self._ws = websocket.create_connection(url, suppress_origin=True, timeout=timeout)
        self.events: list[dict] = []
        self._lock = threading.Lock()
        self._replies: dict[int, dict] = {}  # command replies by id, for `command`
        self._replied = threading.Condition(self._lock)
        self._next_id = 2
        self._names = names
        self._send({"id": 1, "method": "session.subscribe", "params": {"events": list(names)}})
        reply = json.loads(self._ws.recv())
        if reply.get("type") != "success":
            raise RuntimeError(f"BiDi subscribe failed: {reply.get('error')}: {reply.get('message')}")
        self._subscription: str | None = (reply.get("result") or {}).get("subscription")
        self._ws.settimeout(None)
        self._thread = threading.Thread(target=self._read, name="bidi-events", daemon=True)
        self._thread.start()

    def _send(self, message: dict) -> None:
        self._ws.send(json.dumps(message))

    def _read(self) -> None:
        while True:
            try:
                message = json.loads(self._ws.recv())
            except Exception:  # closed by us or by the browser going away
                return
            with self._lock:
                if message.get("type") == "event":
                    self.events.append(message)
                elif isinstance(message.get("id"), int):
                    self._replies[message["id"]] = message
                    self._replied.notify_all()

    def command(self, method: str, params: dict, timeout: float = 10.0) -> dict:
        """Send one BiDi command and return its result; RuntimeError on an error reply or no reply in time."""
        with self._lock:
            ident, self._next_id = self._next_id, self._next_id + 1
        self._send({"id": ident, "method": method, "params": params})
        with self._replied:
            if not self._replied.wait_for(lambda: ident in self._replies, timeout):
                raise RuntimeError(f"BiDi {method}: no reply within {timeout:g} s")
            reply = self._replies.pop(ident)
        if reply.get("type") != "success":
            raise RuntimeError(f"BiDi {method} failed: {reply.get('error')}: {reply.get('message')}")
        return reply.get("result") or {}

    def resubscribe(self) -> None:
        """End the subscription and subscribe again, to the same events.

        Firefox serves network events through one DevTools network observer per session, made when the first
        network event is subscribed to and dropped when the last is unsubscribed. The observer keeps every
        server certificate it decoded, by fingerprint, for as long as it lives, so in a browser that serves
        many visits a site seen before costs the parent less (docs/visit.md); a new observer keeps nothing.
        """
        params = {"subscriptions": [self._subscription]} if self._subscription else {"events": list(self._names)}
        self.command("session.unsubscribe", params)
        self._subscription = self.command("session.subscribe", {"events": list(self._names)}).get("subscription")

    def take(self) -> list[dict]:
        """The events so far, removed from the log (a browser serving many visits reads each visit's own)."""
        with self._lock:
            taken, self.events = self.events, []
        return taken

    def snapshot(self) -> list[dict]:
        with self._lock:
            return list(self.events)

    def settle(self, max_wait: float = 0.5) -> None:
        """Wait (briefly) until every request seen has completed or failed."""
        deadline = time.monotonic() + max_wait
        while time.monotonic() < deadline:
            open_requests: set[tuple] = set()
            for event in self.snapshot():
                params = event["params"]
                key = (params.get("request", {}).get("request"), params.get("redirectCount"))
                if event["method"] == "network.beforeRequestSent":
                    open_requests.add(key)
                elif event["method"] in ("network.responseCompleted", "network.fetchError"):
                    open_requests.discard(key)
            if not open_requests:
                return
            time.sleep(0.02)

    def close(self) -> None:
        try:
            self._ws.close(timeout=0.2)
        except Exception:
            pass
        self._thread.join(timeout=1.0)
