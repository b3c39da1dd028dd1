from django.urls import path

from siem import api

api_urlpatterns = [
    path("siem/sinks", api.SinksView.as_view(), name="siem-sinks"),
    path("siem/sinks/<int:pk>", api.SinkView.as_view(), name="siem-sink"),
]
