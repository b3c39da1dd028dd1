from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from audit.urls import api_urlpatterns as audit_api
from audit.urls import page_urlpatterns as audit_pages
from config import observability
from reconciliation import escalation_pages, fleet_views, group_rule_pages
from reconciliation import views as reconciliation_views
from reconciliation.urls import api_urlpatterns as reconciliation_api
from reconciliation.urls import otlp_urlpatterns
from registry.sso_views import SignInCallbackView, SignInPageView, SignInRequestView
from registry.urls import api_urlpatterns as registry_api
from registry.urls import page_urlpatterns as registry_pages

api_v1 = [*registry_api, *reconciliation_api, *audit_api]

urlpatterns = [
    path("", reconciliation_views.overview, name="home"),
    path("escalations/", escalation_pages.escalations, name="escalations"),
    path("escalations/<int:pk>/triage", escalation_pages.escalation_triage,
         name="escalations-triage"),
    path("escalations/<int:pk>/resolve", escalation_pages.escalation_resolve,
         name="escalations-resolve"),
    path("findings/", reconciliation_views.findings, name="findings"),
    path("group-rules/", group_rule_pages.group_rule_list, name="group-rules"),
    path("group-rules/<slug:name>/", group_rule_pages.group_rule_detail, name="group-rule"),
    path("lab/", reconciliation_views.lab, name="lab"),
    path("fleet/", fleet_views.fleet_page, name="fleet"),
    path("vendor/plotly.min.js", reconciliation_views.plotly_js, name="plotly-js"),
    path("login/", SignInPageView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Single sign-on (404 unless OIDC_CLIENT_ID is set); the names are mozilla-django-oidc's.
    path("sso/start/", SignInRequestView.as_view(), name="oidc_authentication_init"),
    path("sso/callback/", SignInCallbackView.as_view(), name="oidc_authentication_callback"),
    *audit_pages,
    *registry_pages,
    path("api/v1/", include(api_v1)),
    *otlp_urlpatterns,
    path("api/schema", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's start-up script as a file: the CSP allows no inline one.
    path("api/docs", SpectacularSwaggerSplitView.as_view(
        url_name="schema", template_name="api_docs.html"), name="api-docs"),
    path("healthz", observability.healthz, name="healthz"),
    path("readyz", observability.readyz, name="readyz"),
    path("metrics", observability.metrics, name="metrics"),
    path("django-rq/", include("django_rq.urls")),
    path("admin/", admin.site.urls),
]

handler400 = "config.api_errors.bad_request"
handler404 = "config.api_errors.not_found"
handler500 = "config.api_errors.server_error"
