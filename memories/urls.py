from __future__ import annotations

from django.urls import path

from config.routes import object_paths
from memories import views

urlpatterns = [
    path("", views.timeline, name="timeline"),
    path("calendar/", views.memory_calendar, name="memory_calendar"),
    path("on-this-day/", views.memory_on_this_day, name="memory_on_this_day"),
    *object_paths(views, "memory", ["create", "detail", "edit", "delete"], prefix="memories/"),
    path("memories/people-row/", views.memory_participant_row, name="memory_participant_row"),
    path(
        "memories/<uuid:memory_id>/replaces/", views.memory_supersede_options, name="memory_supersede_options"
    ),
    path("memories/<uuid:memory_id>/replaces/add/", views.memory_supersede, name="memory_supersede"),
    path("memories/<uuid:memory_id>/replaces/undo/", views.memory_unsupersede, name="memory_unsupersede"),
    path(
        "memories/<uuid:memory_id>/suggestions/<int:proposal_id>/confirm/",
        views.supersession_proposal_confirm,
        name="supersession_proposal_confirm",
    ),
    path(
        "memories/<uuid:memory_id>/suggestions/<int:proposal_id>/dismiss/",
        views.supersession_proposal_dismiss,
        name="supersession_proposal_dismiss",
    ),
]
