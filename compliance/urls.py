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
api_urlpatterns += [
    path("frameworks", api.FrameworksView.as_view(), name="frameworks"),
    path("frameworks/<slug:framework>/report", api.FrameworkReportView.as_view(),
         name="framework-report"),
    path("frameworks/<slug:framework>/evidence", api.FrameworkEvidenceView.as_view(),
         name="framework-evidence"),
    path("frameworks/<slug:framework>/controls", api.FrameworkControlsView.as_view(),
         name="framework-controls"),
    path("frameworks/<slug:framework>/controls/<str:control>/retire",
         api.FrameworkControlRetireView.as_view(), name="framework-control-retire"),
]
