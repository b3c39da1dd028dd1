"""Severity graded by what a drift risks, so not every finding reads HIGH: a tool removed is
low, a limit loosened medium, write access gained high."""

import pytest

from reconciliation.reconciler.diff import DriftKind, Severity, drift_severity


@pytest.mark.parametrize(("kind", "actual", "expected"), [
    (DriftKind.TOOL_REMOVED, None, Severity.LOW),
    (DriftKind.TOOL_ADDED, "crm.search", Severity.MEDIUM),
    (DriftKind.LIMIT_RAISED, 80, Severity.MEDIUM),
    (DriftKind.ACTION_LIMIT_RAISED, 1000, Severity.MEDIUM),
    (DriftKind.LIMIT_MISSING, None, Severity.HIGH),
    (DriftKind.ACTION_LIMIT_MISSING, None, Severity.HIGH),  # the $500 sign-off rule dropped
    (DriftKind.DATA_ADDED, "read", Severity.MEDIUM),
    (DriftKind.DATA_ADDED, "write", Severity.HIGH),
    (DriftKind.DATA_WIDENED, "admin", Severity.HIGH),
    (DriftKind.DATA_WIDENED, "superuser", Severity.HIGH),  # unknown access counts as the worst
    (DriftKind.EXPIRED_GRANT_PRESENT, "read", Severity.MEDIUM),
    (DriftKind.EXPIRED_GRANT_PRESENT, "write", Severity.HIGH),
    (DriftKind.DATA_NARROWED, "read", Severity.LOW),
    (DriftKind.LIMIT_LOWERED, 1, Severity.LOW),
    (DriftKind.RUNNING_WHILE_SUSPENDED, True, Severity.HIGH),
])
def test_severity_follows_the_risk_of_the_change(kind, actual, expected):
    assert drift_severity(kind, actual) == expected


def test_every_kind_has_a_severity_and_all_three_grades_are_used():
    grades = {drift_severity(kind, None) for kind in DriftKind}
    assert grades == {Severity.LOW, Severity.MEDIUM, Severity.HIGH}
