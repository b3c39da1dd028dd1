"""One event loop per process for sending alerts to the channel layer.

`async_to_sync` builds a new event loop for each call, and channels_redis keeps its Redis
connections per loop, so every alert paid for a new loop and a new connection (a fifth of a
worker's time in the drift bench). Here one daemon thread runs one loop for the life of the
process and every send is handed to it; a forked child (an RQ work horse) starts its own."""

import asyncio
import os
import threading
from typing import Any

from channels.layers import get_channel_layer

SEND_TIMEOUT_SECONDS = 5


class _LoopThread:
    """An event loop running forever in a daemon thread, owned by the process that made it."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True, name="alert-sender").start()


_lock = threading.Lock()
_current: _LoopThread | None = None


def _loop() -> asyncio.AbstractEventLoop:
    global _current
    with _lock:
        if _current is None or _current.pid != os.getpid():  # none yet, or inherited by fork
            _current = _LoopThread()
        return _current.loop


def group_send(group: str, message: dict[str, Any]) -> None:
    """Send `message` to `group` on this process's channel layer; raises what the layer
    raises, or TimeoutError when it does not answer in time."""
    future = asyncio.run_coroutine_threadsafe(get_channel_layer().group_send(group, message),
                                              _loop())
    try:
        future.result(timeout=SEND_TIMEOUT_SECONDS)
    except TimeoutError:
        future.cancel()
        raise
