"""Where a finding's durations start and end, shared by the overview and /metrics: time to
detect and time to fix are both measured from the drifting event, not from the pass."""

from django.db.models import F, Q
from django.db.models.functions import Coalesce

from reconciliation.attribution import ROLLOUT_PREFIX
from reconciliation.choices import FindingStatus

# Drift, not the rollout of an approved generation (a sync, measured on its own).
DRIFT_ONLY = ~Q(cause_key__startswith=ROLLOUT_PREFIX)

# The drifting event's own time (the observation that showed it), else when a pass found it.
DRIFT_STARTED = Coalesce("observed_at", "detected_at")
# A verified correction of the current occurrence: a reopened finding keeps the previous
# occurrence's corrected_at, which lies before its new detected_at (a negative "time to fix").
FIXED_THIS_OCCURRENCE = Q(status=FindingStatus.CORRECTED, corrected_at__gte=F("detected_at"))
# An observation stamped after the pass that read it (clock skew) is not a negative delay.
OBSERVED_IN_ORDER = Q(observed_at__isnull=True) | Q(observed_at__lte=F("detected_at"))
