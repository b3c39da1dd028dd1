from django.urls import path
from rest_framework.routers import SimpleRouter

from reconciliation import api, fleet_api, inbox_api
from runtime import behaviour_api, group_rules_api

router = SimpleRouter(trailing_slash=False)
router.register("findings", api.FindingViewSet, basename="finding")
router.register("escalations", api.EscalationViewSet, basename="escalation")
router.register("group-rules", group_rules_api.GroupRuleViewSet, basename="group-rule")

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
    path("events", behaviour_api.EventsView.as_view(), name="events"),
    path("agents/<slug:name>/decisions", behaviour_api.DecisionRequestView.as_view(),
         name="decisions"),
    path("agents/<slug:name>/events", behaviour_api.AgentEventsView.as_view(),
         name="agent-events"),
    path("decisions/<uuid:decision_id>", behaviour_api.DecisionView.as_view(), name="decision"),
    path("unregistered", behaviour_api.UnregisteredView.as_view(), name="unregistered"),
    path("unregistered/<slug:name>/assign", behaviour_api.AssignUnregisteredView.as_view(),
         name="unregistered-assign"),
    path("proposals/<int:pk>/backtest", behaviour_api.BacktestView.as_view(), name="backtest"),
    path("group-rules/what-if", group_rules_api.GroupRuleWhatIfView.as_view(),
         name="group-rules-what-if"),
    path("group-rules/<slug:name>/what-if", group_rules_api.SavedGroupRuleWhatIfView.as_view(),
         name="group-rule-what-if"),
    *router.urls,
]

otlp_urlpatterns = [path("v1/traces", behaviour_api.TracesView.as_view(), name="otlp-traces")]
