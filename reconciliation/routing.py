from django.urls import path

from reconciliation.consumers import AlertsConsumer

websocket_urlpatterns = [path("ws/alerts", AlertsConsumer.as_asgi())]
