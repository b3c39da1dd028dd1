from django.urls import path
from rest_framework.routers import SimpleRouter

from registry import (
    api,
    evidence_api,
    lifecycle_api,
    notification_api,
    recertification_api,
    review_api,
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
    path("notifications/preferences/<int:pk>/verify",
         notification_api.PreferenceVerifyView.as_view(), name="notification-preference-verify"),
    path("proposals/<int:pk>/thread", review_api.ThreadView.as_view(), name="proposal-thread"),
    path("manifests", api.ManifestView.as_view(), name="manifests"),
    path("agents/<slug:name>/evidence", evidence_api.AgentEvidenceView.as_view(),
         name="agent-evidence"),
    path("agents/<slug:name>/proposals", api.AgentProposalView.as_view(), name="agent-propose"),
    path("agents/<slug:name>/rollback", lifecycle_api.RollbackView.as_view(),
         name="agent-rollback"),
    path("agents/<slug:name>/waivers", lifecycle_api.WaiverView.as_view(), name="agent-waivers"),
    path("agents/<slug:name>/retirement", lifecycle_api.RetireView.as_view(),
         name="agent-retire"),
    path("retirements/<int:pk>/approve", lifecycle_api.RetirementApproveView.as_view(),
         name="retirement-approve"),
    path("retirements/<int:pk>/reject", recertification_api.RetirementRejectView.as_view(),
         name="retirement-reject"),
    path("waivers/<int:pk>/approve", lifecycle_api.WaiverConfirmView.as_view(),
         name="waiver-approve"),
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
