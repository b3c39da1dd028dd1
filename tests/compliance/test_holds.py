"""The apps below compliance learn whether a stop reaches an agent through registry.holds,
which compliance fills at start-up; a process where nobody filled it refuses to answer."""

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from registry import holds


def test_compliance_answers_for_the_apps_below_it(refund_agent):
    assert holds.stop_reason(refund_agent) is None
    assert holds.stopped(refund_agent) is False


def test_with_no_stop_reader_asking_is_an_error_never_not_stopped(refund_agent, monkeypatch):
    monkeypatch.setattr(holds, "_readers", {})  # a process where compliance never got ready
    with pytest.raises(ImproperlyConfigured):
        holds.stop_reason(refund_agent)
    with pytest.raises(ImproperlyConfigured):
        holds.held_by_stop(refund_agent)
    with pytest.raises(ImproperlyConfigured):  # a pass never corrects through an unknown window
        holds.hold_for_window(refund_agent, timezone.now(), None, {})
