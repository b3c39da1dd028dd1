from django.urls import path
from rest_framework.routers import SimpleRouter

from registry import (
    api,
    inbox_pages,
    lifecycle_api,
    lifecycle_views,
    notification_api,
    notification_pages,
    review_api,
    review_pages,
    stepup_views,
    views,
)

router = SimpleRouter(trailing_slash=False)
router.register("agents", api.AgentViewSet, basename="agent")
router.register("proposals", api.ProposalViewSet, basename="proposal")
router.register("guardrails", api.GuardrailViewSet, basename="guardrail")
router.register("tokens", api.TokenViewSet, basename="token")

api_urlpatterns = [
    path("notifications/preferences", notification_api.PreferencesView.as_view(),
         name="notification-preferences-api"),
    path("notifications/preferences/<int:pk>", notification_api.PreferenceView.as_view(),
         name="notification-preference-api"),
    path("proposals/<int:pk>/thread", review_api.ThreadView.as_view(), name="proposal-thread"),
    path("manifests", api.ManifestView.as_view(), name="manifests"),
    path("agents/<slug:name>/proposals", api.AgentProposalView.as_view(), name="agent-propose"),
    path("agents/<slug:name>/rollback", lifecycle_api.RollbackView.as_view(),
         name="agent-rollback"),
    path("agents/<slug:name>/waivers", lifecycle_api.WaiverView.as_view(), name="agent-waivers"),
    path("agents/<slug:name>/retirement", lifecycle_api.RetireView.as_view(),
         name="agent-retire"),
    path("retirements/<int:pk>/approve", lifecycle_api.RetirementApproveView.as_view(),
         name="retirement-approve"),
    *router.urls,
]

page_urlpatterns = [
    path("account/two-factor/", stepup_views.two_factor, name="registry-two-factor"),
    path("agents/", views.agent_list, name="registry-agents"),
    path("agents/<slug:name>/", views.agent_detail, name="registry-agent"),
    path("agents/<slug:name>/rollback", lifecycle_views.agent_rollback,
         name="registry-agent-rollback"),
    path("agents/<slug:name>/waivers", lifecycle_views.agent_waive,
         name="registry-agent-waive"),
    path("agents/<slug:name>/retirement", lifecycle_views.agent_retire,
         name="registry-agent-retire"),
    path("retirements/<int:pk>/approve", lifecycle_views.retirement_approve,
         name="registry-retirement-approve"),
    path("manifests/new", views.manifest_apply, name="registry-apply"),
    path("approvals/", views.approvals_inbox, name="registry-approvals"),
    path("inbox/", inbox_pages.inbox_page, name="inbox-page"),
    path("account/notifications/", notification_pages.notification_preferences,
         name="notification-preferences"),
    path("account/notifications/<int:pk>/delete", notification_pages.notification_preference_delete,
         name="notification-preference-delete"),
    path("inbox/triage", inbox_pages.inbox_triage, name="inbox-triage-page"),
    path("inbox/incidents/<int:pk>/resolve", inbox_pages.incident_resolve,
         name="incident-resolve-page"),
    path("proposals/<int:pk>/", views.proposal_detail, name="registry-proposal"),
    path("proposals/<int:pk>/approve", views.proposal_approve, name="registry-proposal-approve"),
    path("proposals/<int:pk>/reject", views.proposal_reject, name="registry-proposal-reject"),
    path("proposals/<int:pk>/comment", review_pages.proposal_comment,
         name="registry-proposal-comment"),
    path("proposals/<int:pk>/withdraw", views.proposal_withdraw,
         name="registry-proposal-withdraw"),
    path("tokens/", views.token_list, name="registry-tokens"),
    path("tokens/<int:pk>/revoke", views.token_revoke, name="registry-token-revoke"),
    path("tokens/<int:pk>/keep", views.token_keep, name="registry-token-keep"),
    path("guardrails/", views.guardrail_list, name="registry-guardrails"),
    path("guardrails/new", views.guardrail_create, name="registry-guardrail-new"),
    path("guardrails/<slug:name>/edit", views.guardrail_edit, name="registry-guardrail-edit"),
    path("guardrails/<slug:name>/delete", views.guardrail_delete,
         name="registry-guardrail-delete"),
]
