"""The actors the audit trail names for the product's own changes (no person made them)."""

RECONCILER = "system:reconciler"  # the loop: passes, switches, retirements, silences, lapses
RECERTIFICATION = "system:recertification"  # review dates, reminders and their overdue effects
