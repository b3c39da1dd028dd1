"""Whether a stop reaches an agent, for the enforcement points below the stop button: the
decision point, suspensions that end, escalations. compliance (which owns stops) sits above
them and fills this in from its AppConfig.ready. Fails closed: with nothing filled in, asking
is an error, never "not stopped"."""

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured

_readers: dict[str, Callable[[Any], Any]] = {}


def register(*, stop_reason: Callable[[Any], str | None],
             held_by_stop: Callable[[Any], bool]) -> None:
    """compliance's answers (compliance/stops.py), once per process."""
    _readers.update(stop_reason=stop_reason, held_by_stop=held_by_stop)


def _reader(name: str) -> Callable[[Any], Any]:
    if name not in _readers:
        raise ImproperlyConfigured("no stop reader: is compliance in INSTALLED_APPS?")
    return _readers[name]


def stop_reason(agent: Any) -> str | None:
    """Why `agent` is stopped ("stop N: ..."), or None when no stop reaches it."""
    return _reader("stop_reason")(agent)


def stopped(agent: Any) -> bool:
    """Whether a stop reaches `agent` now."""
    return stop_reason(agent) is not None


def held_by_stop(agent: Any) -> bool:
    """A hold on a suspended agent ends while a stop reaches it: the stop takes the suspension
    over (compliance/stops.py). Call inside the transaction that would have resumed it."""
    return _reader("held_by_stop")(agent)
