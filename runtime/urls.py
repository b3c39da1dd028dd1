"""The runtime's API routes: behaviour events, OTLP traces, decisions, backtests, group rules."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from runtime import behaviour_api, group_rules_api

router = SimpleRouter(trailing_slash=False)
router.register("group-rules", group_rules_api.GroupRuleViewSet, basename="group-rule")

api_urlpatterns = [
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
