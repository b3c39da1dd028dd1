"""Behaviour events, sent in batches by a background thread.

Memory stays bounded while the control plane is down: at most `max_queue` events wait (the
oldest are dropped first, and counted) plus the one batch in flight. A batch that got no
answer is sent again unchanged, with the same ids, until it gets one: the server answers
`duplicate` for ids it already has, so nothing is counted twice. `close()` (also run at
interpreter exit) sends what is left, for a bounded time."""

from __future__ import annotations

import atexit
import logging
import random
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentgov.errors import ApiError, RateLimited, ServerError, Unreachable

if TYPE_CHECKING:
    from agentgov.responses import EventsResult

log = logging.getLogger("agentgov.events")


class EventBatcher:
    """Queues events and sends them in batches from one daemon thread."""

    def __init__(self, send: Callable[[list[dict[str, Any]]], EventsResult], *,
                 max_queue: int = 10_000, batch_size: int = 500, flush_interval: float = 1.0,
                 retry_base: float = 0.5, retry_cap: float = 30.0) -> None:
        if max_queue < 1 or batch_size < 1:
            raise ValueError("max_queue and batch_size must be at least 1")
        self._send = send
        self.max_queue = max_queue
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self.retry_base = retry_base
        self.retry_cap = retry_cap
        self._cond = threading.Condition()
        self._queue: deque[tuple[int, dict[str, Any]]] = deque()
        self._batch: list[tuple[int, dict[str, Any]]] = []  # in flight until answered
        self._next_seq = 1
        self._flush_wanted = False
        self._closing = False
        self._stopped = False
        self._thread: threading.Thread | None = None
        # What happened to the events so far.
        self.accepted = 0
        self.duplicates = 0
        self.rejected = 0
        self.dropped = 0  # evicted from a full queue, or left unsent at close
        self.failed = 0  # refused as a whole by a non-retryable error (e.g. 400, 401, 403)
        self.attempts = 0  # POSTs tried, including retries
        self.last_error: Exception | None = None
        self.rejections: deque[dict[str, Any]] = deque(maxlen=100)  # the latest rejected results

    @property
    def queued(self) -> int:
        """Events waiting, including the batch in flight."""
        with self._cond:
            return len(self._queue) + len(self._batch)

    def add(self, event: dict[str, Any]) -> None:
        """Queue one event; never blocks on the network."""
        with self._cond:
            if self._closing:
                self.dropped += 1
                log.warning("event %s dropped: the event sender is closed", event.get("id"))
                return
            if len(self._queue) >= self.max_queue:
                self._queue.popleft()
                self.dropped += 1
                if self.dropped == 1 or self.dropped % 1000 == 0:
                    log.warning("event queue full (%d): dropped %d oldest event(s) so far",
                                self.max_queue, self.dropped)
            self._queue.append((self._next_seq, event))
            self._next_seq += 1
            if len(self._queue) >= self.batch_size:
                self._cond.notify_all()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="agentgov-events",
                                                daemon=True)
                self._thread.start()
                atexit.register(self.close)

    def _oldest_unsettled(self) -> int:
        if self._batch:
            return self._batch[0][0]
        return self._queue[0][0] if self._queue else self._next_seq

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every event added before this call is answered (or given up on);
        False if `timeout` ran out first."""
        with self._cond:
            target = self._next_seq - 1
            if self._oldest_unsettled() > target:
                return True
            self._flush_wanted = True
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._oldest_unsettled() > target or self._stopped,
                                timeout)
            return self._oldest_unsettled() > target

    def close(self, timeout: float = 10.0) -> None:
        """Send what is queued (for up to `timeout` seconds), then stop the thread."""
        atexit.unregister(self.close)
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self.flush(timeout)
        with self._cond:
            self._stopped = True
            left = len(self._queue) + len(self._batch)
            if left:
                log.warning("closing with %d event(s) unsent: %s", left, self.last_error)
            self.dropped += len(self._queue)  # the batch in flight is counted by its sender
            self._queue.clear()
            self._cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _next_batch(self) -> list[tuple[int, dict[str, Any]]] | None:
        """The batch to send (the unanswered one first); None when it is time to stop."""
        with self._cond:
            while not self._batch:
                if self._stopped:
                    return None
                if not self._queue:
                    self._flush_wanted = False
                    self._cond.notify_all()
                    if self._closing:
                        return None
                self._cond.wait_for(
                    lambda: self._stopped or self._closing or self._flush_wanted
                    or len(self._queue) >= self.batch_size, self.flush_interval)
                take = min(self.batch_size, len(self._queue))
                self._batch = [self._queue.popleft() for _ in range(take)]
            return self._batch

    def _settle(self, result: EventsResult | None) -> None:
        with self._cond:
            if result is None:
                self.failed += len(self._batch)
            else:
                self.accepted += result.accepted
                self.duplicates += result.duplicates
                self.rejected += result.rejected
                self.rejections.extend(r for r in result.results if r.get("status") == "rejected")
            self._batch = []
            self._cond.notify_all()

    def _run(self) -> None:
        failures = 0
        while (batch := self._next_batch()) is not None:
            self.attempts += 1
            try:
                result = self._send([event for _, event in batch])
            except (Unreachable, RateLimited, ServerError) as error:
                self.last_error = error
                failures += 1
                delay = random.uniform(0, min(self.retry_cap, self.retry_base * 2 ** failures))
                if isinstance(error, RateLimited) and error.retry_after is not None:
                    delay = min(error.retry_after, self.retry_cap)
                log.info("events not sent (%s); retrying the same batch in %.1fs", error, delay)
                with self._cond:
                    if self._cond.wait_for(lambda: self._stopped, delay):
                        self.dropped += len(self._batch)
                        self._batch = []
                        self._cond.notify_all()
                        return
                continue
            except ApiError as error:
                self.last_error = error
                log.error("the control plane refused %d event(s): %s", len(batch), error)
                self._settle(None)
            except Exception as error:  # a bug must not silently kill the sender
                self.last_error = error
                log.exception("sending %d event(s) failed", len(batch))
                self._settle(None)
            else:
                if result.rejected:
                    log.warning("%d event(s) rejected, e.g. %s", result.rejected,
                                next((r for r in result.results
                                      if r.get("status") == "rejected"), None))
                self._settle(result)
            failures = 0
