from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerSplitView

from audit.urls import api_urlpatterns as audit_api
from chat.urls import api_urlpatterns as chat_api
from compliance.urls import api_urlpatterns as compliance_api
from config import observability
from config.schema import SchemaView
from gitsource.urls import api_urlpatterns as gitsource_api
from reconciliation.urls import api_urlpatterns as reconciliation_api
from reconciliation.urls import guardrail_whatif_urlpatterns as guardrail_whatif_api
from registry.urls import api_urlpatterns as registry_api
from runtime.urls import api_urlpatterns as runtime_api
from runtime.urls import otlp_urlpatterns
from siem.urls import api_urlpatterns as siem_api
from sources.urls import api_urlpatterns as sources_api

# The guardrail what-if first: the registry's guardrail detail route would take "what-if" for
# a guardrail's name.
api_v1 = [*guardrail_whatif_api, *registry_api, *reconciliation_api, *runtime_api, *audit_api,
          *sources_api, *siem_api, *chat_api, *gitsource_api, *compliance_api]

urlpatterns = [
    path("", include("console.urls")),
    path("api/v1/", include(api_v1)),
    *otlp_urlpatterns,
    path("api/schema", SchemaView.as_view(), name="schema"),
    # The split view serves Swagger UI's start-up script as a file: the CSP allows no inline one.
    path("api/docs", SpectacularSwaggerSplitView.as_view(
        url_name="schema", template_name="api_docs.html"), name="api-docs"),
    path("healthz", observability.healthz, name="healthz"),
    path("readyz", observability.readyz, name="readyz"),
    path("metrics", observability.metrics, name="metrics"),
    path("chat/", include("chat.urls")),
    path("django-rq/", include("django_rq.urls")),
    path("admin/", admin.site.urls),
]

handler400 = "config.api_errors.bad_request"
handler404 = "config.api_errors.not_found"
handler500 = "config.api_errors.server_error"
