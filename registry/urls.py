from django.urls import path
from rest_framework.routers import SimpleRouter

from registry import (
    api,
    lifecycle_api,
    lifecycle_views,
    recertification_api,
    recertification_views,
    stepup_views,
    toxic_api,
    toxic_views,
    views,
)

router = SimpleRouter(trailing_slash=False)
router.register("agents", api.AgentViewSet, basename="agent")
router.register("proposals", api.ProposalViewSet, basename="proposal")
router.register("guardrails", api.GuardrailViewSet, basename="guardrail")
router.register("tokens", api.TokenViewSet, basename="token")
router.register("toxic-combinations", toxic_api.ToxicCombinationViewSet, basename="toxic")

api_urlpatterns = [
    path("manifests", api.ManifestView.as_view(), name="manifests"),
    path("agents/<slug:name>/proposals", api.AgentProposalView.as_view(), name="agent-propose"),
    path("agents/<slug:name>/rollback", lifecycle_api.RollbackView.as_view(),
         name="agent-rollback"),
    path("agents/<slug:name>/waivers", lifecycle_api.WaiverView.as_view(), name="agent-waivers"),
    path("agents/<slug:name>/retirement", lifecycle_api.RetireView.as_view(),
         name="agent-retire"),
    path("retirements/<int:pk>/approve", lifecycle_api.RetirementApproveView.as_view(),
         name="retirement-approve"),
    path("guardrails/what-if", api.GuardrailWhatIfView.as_view(), name="guardrails-what-if"),
    path("guardrails/<slug:name>/what-if", api.SavedGuardrailWhatIfView.as_view(),
         name="guardrail-what-if"),
    path("retirements/<int:pk>/reject", recertification_api.RetirementRejectView.as_view(),
         name="retirement-reject"),
    path("waivers/<int:pk>/withdraw", recertification_api.WaiverWithdrawView.as_view(),
         name="waiver-withdraw"),
    path("agents/<slug:name>/recertify", recertification_api.RecertifyView.as_view(),
         name="agent-recertify"),
    path("recertification", recertification_api.RecertificationReportView.as_view(),
         name="recertification"),
    path("review-intervals", recertification_api.ReviewIntervalsView.as_view(),
         name="review-intervals"),
    path("review-intervals/<slug:level>", recertification_api.ReviewIntervalView.as_view(),
         name="review-interval"),
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
    path("retirements/<int:pk>/reject", recertification_views.retirement_reject,
         name="registry-retirement-reject"),
    path("waivers/<int:pk>/withdraw", recertification_views.waiver_withdraw,
         name="registry-waiver-withdraw"),
    path("agents/<slug:name>/recertify", recertification_views.agent_recertify,
         name="registry-agent-recertify"),
    path("recertification/", recertification_views.recertification_report,
         name="registry-recertification"),
    path("recertification/intervals/<slug:level>", recertification_views.interval_set,
         name="registry-review-interval"),
    path("manifests/new", views.manifest_apply, name="registry-apply"),
    path("approvals/", views.approvals_inbox, name="registry-approvals"),
    path("proposals/<int:pk>/", views.proposal_detail, name="registry-proposal"),
    path("proposals/<int:pk>/approve", views.proposal_approve, name="registry-proposal-approve"),
    path("proposals/<int:pk>/reject", views.proposal_reject, name="registry-proposal-reject"),
    path("proposals/<int:pk>/withdraw", views.proposal_withdraw,
         name="registry-proposal-withdraw"),
    path("tokens/", views.token_list, name="registry-tokens"),
    path("tokens/<int:pk>/revoke", views.token_revoke, name="registry-token-revoke"),
    path("tokens/<int:pk>/keep", views.token_keep, name="registry-token-keep"),
    path("toxic/", toxic_views.toxic_list, name="registry-toxic"),
    path("toxic/<slug:name>/delete", toxic_views.toxic_delete, name="registry-toxic-delete"),
    path("guardrails/", views.guardrail_list, name="registry-guardrails"),
    path("guardrails/new", views.guardrail_create, name="registry-guardrail-new"),
    path("guardrails/<slug:name>/edit", views.guardrail_edit, name="registry-guardrail-edit"),
    path("guardrails/<slug:name>/delete", views.guardrail_delete,
         name="registry-guardrail-delete"),
]
