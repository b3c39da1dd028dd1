from django.urls import path
from rest_framework.routers import SimpleRouter

from audit import api

router = SimpleRouter(trailing_slash=False)
router.register("audit/entries", api.AuditEntryViewSet, basename="audit-entry")

api_urlpatterns = [
    path("audit", api.AuditEntryViewSet.as_view({"get": "list"}), name="audit-list"),
    path("audit/verify", api.AuditVerifyView.as_view(), name="audit-verify"),
    path("audit/export", api.AuditExportView.as_view(), name="audit-export"),
    path("audit/checkpoints", api.AuditCheckpointList.as_view(), name="audit-checkpoints"),
    path("audit/keys", api.AuditKeysView.as_view(), name="audit-keys"),
    path("audit/trusted-keys", api.AuditTrustedKeysView.as_view(), name="audit-trusted-keys"),
    path("audit/proofs/inclusion", api.AuditInclusionProofView.as_view(),
         name="audit-inclusion-proof"),
    path("audit/proofs/consistency", api.AuditConsistencyProofView.as_view(),
         name="audit-consistency-proof"),
    *router.urls,
]
