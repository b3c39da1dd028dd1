"""Behaviour events under the loop's retention (reconciliation/retention.py), registered from
runtime's AppConfig.ready. Their floor: the longest window a rule may count, events accepted
late, the backtest and the group rule what-ifs."""

import math

from reconciliation.retention import Kind
from registry.manifest import MAX_DURATION_SECONDS
from runtime import backtest, whatif
from runtime.events import MAX_PAST

DAY_SECONDS = 86_400

EVENTS = Kind("events", "runtime.BehaviourEvent", "ts", "RETENTION_EVENTS_DAYS", needs=(
    (math.ceil(MAX_DURATION_SECONDS / DAY_SECONDS), "the longest window a rule may count"),
    (MAX_PAST.days, "events accepted late"),
    (backtest.BACKTEST_DAYS, "the backtest"), (whatif.DAYS, "group rule what-ifs")),
    companions=(("runtime.EventKey", "ts"),))  # ingest's repeat check, kept as long
