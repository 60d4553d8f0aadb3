from __future__ import annotations

from django.urls import path

from memories import views

urlpatterns = [
    path("", views.timeline, name="timeline"),
    path("memories/new/", views.memory_create, name="memory_create"),
    path("memories/people-row/", views.memory_participant_row, name="memory_participant_row"),
    path("memories/<uuid:memory_id>/", views.memory_detail, name="memory_detail"),
    path("memories/<uuid:memory_id>/edit/", views.memory_edit, name="memory_edit"),
    path("memories/<uuid:memory_id>/delete/", views.memory_delete, name="memory_delete"),
]
