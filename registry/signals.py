"""What the registry announces to the apps above it. The registry changes desired state; the
loop (reconciliation) reacts: a pass (which itself asks for the next one at a grant's or a
waiver's end), the fleet view, the toxic-path check, a live alert, an inbox sweep; runtime
adopts a registered agent's earlier events. The registry names none of them: reconciliation
connects its receivers in its AppConfig.ready (reconciliation/receivers.py, the inbox sweep's
in reconciliation/registrations.py), runtime in its own (runtime/apps.py). Each is sent inside
the action's transaction; the receivers defer their own side effects to commit, as the calls
they replace did."""

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.dispatch import Signal

# A pass for one agent after commit: agent_id, trigger (reconciliation.choices.Trigger).
reconcile_requested = Signal()
# Something the fleet view shows changed (a spec, a guardrail, a lifecycle): refresh it.
fleet_changed = Signal()
# Toxic-combination rules changed: check the fleet's paths again.
toxic_rules_changed = Signal()
# A live alert, recorded in the current transaction: event, payload (as alerts.broadcast).
alert_raised = Signal()
# Something new waits in the inbox (an owner's reminder to recertify), in the action's
# transaction: agent_id (the loop sweeps the inbox after commit, so its people are told now
# rather than at the next cron).
inbox_item_added = Signal()
# The agent's review date or overdue state changed, in the action's transaction: agent, now
# (the loop writes its Recertified condition).
review_changed = Signal()
# An overdue agent was recertified: agent, actor, version, now (the loop resolves its
# recertification escalations).
recertified = Signal()
# A review date passed unrecertified: agent, why, effect (registry.choices.OverdueEffect), now
# (the loop escalates to the approvers, alerts, and suspends when the effect says so).
review_overdue = Signal()
# An agent was retired, in the retirement's transaction: agent_id (the loop marks it retired
# and, after commit, stops it on its platform).
agent_retired = Signal()
# An agent was registered, in the registration's transaction: agent, actor (runtime adopts
# what it sent while unregistered).
agent_registered = Signal()


def announce(signal: Signal, **kwargs: Any) -> None:
    """Send `signal`; refuse when nothing listens, which would lose a pass or an alert without a
    word (a process that never ran reconciliation's AppConfig.ready)."""
    if not signal.has_listeners():
        raise ImproperlyConfigured("a registry signal has no receiver: are reconciliation "
                                   "and runtime in INSTALLED_APPS?")
    signal.send(sender=None, **kwargs)
