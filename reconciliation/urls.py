from django.urls import path
from rest_framework.routers import SimpleRouter

from reconciliation import api, fleet_api, guardrail_whatif_api, inbox_api, toxic_api

router = SimpleRouter(trailing_slash=False)
router.register("findings", api.FindingViewSet, basename="finding")
router.register("escalations", api.EscalationViewSet, basename="escalation")
router.register("toxic-combinations", toxic_api.ToxicCombinationViewSet, basename="toxic")

# Before the registry's routes (config/urls.py): its guardrail detail route would take
# "what-if" for a guardrail's name.
guardrail_whatif_urlpatterns = [
    path("guardrails/what-if", guardrail_whatif_api.GuardrailWhatIfView.as_view(),
         name="guardrails-what-if"),
    path("guardrails/<slug:name>/what-if", guardrail_whatif_api.SavedGuardrailWhatIfView.as_view(),
         name="guardrail-what-if"),
]

api_urlpatterns = [
    path("agents/<slug:name>/observed-state", api.ObservedStateView.as_view(),
         name="observed-state"),
    path("agents/<slug:name>/desired-state", api.DesiredStateView.as_view(),
         name="desired-state"),
    path("agents/<slug:name>/reconcile", api.ReconcileNowView.as_view(), name="reconcile-now"),
    path("agents/<slug:name>/shadow", api.AgentShadowView.as_view(), name="agent-shadow"),
    path("agents/<slug:name>/shadow/approve", api.AgentShadowApproveView.as_view(),
         name="agent-shadow-approve"),
    path("control", api.ControlView.as_view(), name="control"),
    path("dashboard", api.DashboardView.as_view(), name="dashboard"),
    path("fleet", fleet_api.FleetView.as_view(), name="fleet-api"),
    path("inbox", inbox_api.InboxView.as_view(), name="inbox"),
    path("inbox/triage", inbox_api.BulkTriageView.as_view(), name="inbox-triage"),
    path("incidents/<int:pk>/resolve", inbox_api.IncidentResolveView.as_view(),
         name="incident-resolve"),
    path("control/shadow", api.ControlShadowView.as_view(), name="control-shadow"),
    path("control/breaker/reset", api.BreakerResetView.as_view(), name="breaker-reset"),
    *router.urls,
]
