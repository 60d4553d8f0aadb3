from __future__ import annotations

from django.urls import path

from pwa import views

urlpatterns = [
    path("manifest.webmanifest", views.manifest, name="pwa_manifest"),
    path("sw.js", views.service_worker, name="pwa_service_worker"),
    path("offline/", views.offline_page, name="pwa_offline"),
    path("offline/captures/", views.offline_capture, name="pwa_offline_capture"),
]
