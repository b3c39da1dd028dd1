"""What the registry announces reaches the loop: every registry signal has reconciliation's
receiver, and a signal nobody listens to is refused rather than lost."""

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.dispatch import Signal

from registry import signals


@pytest.mark.parametrize("name", ["reconcile_requested", "fleet_changed", "toxic_rules_changed",
                                  "alert_raised"])
def test_each_announcement_has_a_listener(name):
    assert getattr(signals, name).has_listeners()


def test_an_announcement_nobody_hears_is_refused():
    with pytest.raises(ImproperlyConfigured):
        signals.announce(Signal(), agent_id=1)
