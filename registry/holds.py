"""Whether a stop or a maintenance window holds an agent, for the enforcement points below
compliance: the decision point, suspensions that end, escalations, the reconcile pass's correct
and verify stages. compliance (which owns stops and windows) sits above them and fills this in
from its AppConfig.ready. Fails closed: with nothing filled in, asking is an error, never "not
stopped" and never "no window"."""

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured

_readers: dict[str, Callable[..., Any]] = {}


def register(*, stop_reason: Callable[[Any], str | None],
             held_by_stop: Callable[[Any], bool],
             hold_for_window: Callable[[Any, datetime, Any, dict[str, Any]], datetime | None]
             ) -> None:
    """compliance's answers (compliance/stops.py, compliance/actions/maintenance.py), once per
    process."""
    _readers.update(stop_reason=stop_reason, held_by_stop=held_by_stop,
                    hold_for_window=hold_for_window)


def _reader(name: str) -> Callable[..., Any]:
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


def hold_for_window(agent: Any, now: datetime, decision: Any,
                    findings: dict[str, Any]) -> datetime | None:
    """Inside a pass: when a maintenance window covers `agent` at `now`, the corrections it
    does not allow are taken out of `decision` (their findings stay open, each held one
    audited) and the window's end is returned (the pass asks to run again then); None when no
    window covers the agent or it held no correction."""
    return _reader("hold_for_window")(agent, now, decision, findings)
