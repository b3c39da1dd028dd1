from django.urls import path

from sources import api

api_urlpatterns = [
    path("agents/<slug:name>/permission-sources", api.PermissionSourcesView.as_view(),
         name="permission-sources"),
]
