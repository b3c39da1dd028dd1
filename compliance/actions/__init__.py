"""Every state change of the compliance app; each writes its audit rows in the same
transaction and does its side effects after commit."""

from compliance.actions.stops import approve_lift, place_stop, request_lift

__all__ = ["approve_lift", "place_stop", "request_lift"]
