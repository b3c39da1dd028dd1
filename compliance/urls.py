from django.urls import path

from compliance import api

api_urlpatterns = [
    path("stops", api.StopsView.as_view(), name="stops"),
    path("stops/<int:pk>/lift", api.StopLiftView.as_view(), name="stop-lift"),
    path("stops/<int:pk>/lift/approve", api.StopLiftApproveView.as_view(),
         name="stop-lift-approve"),
    path("maintenance-windows", api.MaintenanceWindowsView.as_view(),
         name="maintenance-windows"),
    path("maintenance-windows/<int:pk>/cancel", api.MaintenanceWindowCancelView.as_view(),
         name="maintenance-window-cancel"),
]
