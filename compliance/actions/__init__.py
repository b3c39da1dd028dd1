"""Every state change of the compliance app; each writes its audit rows in the same
transaction and does its side effects after commit."""

from compliance.actions.controls import retire_control, save_control
from compliance.actions.maintenance import cancel_window, end_window, schedule_window
from compliance.actions.stops import approve_lift, place_stop, request_lift

__all__ = ["approve_lift", "cancel_window", "end_window", "place_stop", "request_lift",
           "retire_control", "save_control", "schedule_window"]
