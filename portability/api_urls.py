from __future__ import annotations

from django.urls import path

from portability.apis import ExportApi

urlpatterns = [
    path("", ExportApi.as_view(), name="api-export"),
]
