"""How long each kind of growing data is kept, and the floor under it: what the rules, the
backtest and the what-ifs read must still be there. reconciliation.actions.retention applies
it (day partitions dropped on PostgreSQL, batched deletes on SQLite). The loop's own kinds are
here; an app above it registers its own from its AppConfig.ready (runtime its behaviour events:
runtime/retention.py).

The floors are fixed by the code, not by the data: a rule's window is at most 30 days
(registry.manifest.MAX_DURATION_SECONDS, for agents' limits and budgets and for group rules),
events are accepted up to 30 days late (runtime.events.MAX_PAST), the backtest and the
what-ifs read the last 7 days. So a setting under its floor is refused at start-up (the
system check below); should checks be skipped, the job keeps the floor and says so."""

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core import checks

from reconciliation import guardrail_whatif


@dataclass(frozen=True)
class Kind:
    """One kind of data under retention: its model, the time its rows expire by, the setting
    that says how many days are kept, and what needs old rows of it."""

    name: str
    model: str  # its label, app_label.ModelName
    key: str
    setting: str
    needs: tuple[tuple[int, str], ...] = ()  # (days, who reads them)
    # Plain tables whose rows go with this kind's days: (model label, its time field). Rows
    # older than the first day kept are deleted once the kind's own have gone.
    companions: tuple[tuple[str, str], ...] = ()

    @property
    def days(self) -> int:
        return getattr(settings, self.setting)

    @property
    def floor(self) -> tuple[int, str]:
        """The fewest days that may be kept, and who needs them."""
        return max(self.needs, default=(0, ""))


OBSERVATIONS = Kind("observations", "reconciliation.ObservedState", "observed_at",
                    "RETENTION_OBSERVATIONS_DAYS",
                    needs=((guardrail_whatif.DAYS, "guardrail what-ifs"),))
RUNS = Kind("runs", "reconciliation.ReconcileRun", "started_at", "RETENTION_RUNS_DAYS")
ALERTS = Kind("alerts", "reconciliation.AlertEvent", "at", "RETENTION_ALERTS_DAYS")
_kinds: list[Kind] = [OBSERVATIONS, RUNS, ALERTS]


def register(kind: Kind) -> None:
    """Put another app's growing data under retention (once per process)."""
    if all(known.name != kind.name for known in _kinds):
        _kinds.append(kind)


def kinds() -> tuple[Kind, ...]:
    """Every kind under retention: the loop's and those registered."""
    return tuple(_kinds)


@dataclass(frozen=True)
class Keep:
    """The days one kind is kept by, and why (the setting, or the floor that raised it)."""

    days: int
    reason: str


def keep(kind: Kind) -> Keep:
    """How many days of `kind` are kept: its setting, or its floor when that is more."""
    floor, who = kind.floor
    if kind.days < floor:
        return Keep(floor, f"{kind.setting}={kind.days} is under the {floor} days {who} needs;"
                           f" kept {floor}")
    return Keep(kind.days, f"{kind.setting}={kind.days}")


@checks.register(checks.Tags.compatibility)
def check_retention(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Start-up refuses a retention shorter than what reads the old rows."""
    errors = []
    for kind in kinds():
        floor, who = kind.floor
        if kind.days < floor:
            errors.append(checks.Error(
                f"{kind.setting}={kind.days} keeps fewer days of {kind.name} than {who} needs"
                f" ({floor} days)", hint=f"Set {kind.setting} to at least {floor}.",
                id="retention.E001"))
    return errors
