from django.urls import path
from rest_framework.routers import SimpleRouter

from registry import api

router = SimpleRouter(trailing_slash=False)
router.register("agents", api.AgentViewSet, basename="agent")
router.register("proposals", api.ProposalViewSet, basename="proposal")
router.register("guardrails", api.GuardrailViewSet, basename="guardrail")

api_urlpatterns = [
    path("manifests", api.ManifestView.as_view(), name="manifests"),
    path("agents/<slug:name>/proposals", api.AgentProposalView.as_view(), name="agent-propose"),
    *router.urls,
]
