from __future__ import annotations

from django.urls import path

from attachments import views
from config.routes import object_paths

urlpatterns = [
    path("<uuid:attachment_id>/", views.attachment_file, {"variant": "display"}, name="attachment_display"),
    path(
        "<uuid:attachment_id>/thumbnail/",
        views.attachment_file,
        {"variant": "thumbnail"},
        name="attachment_thumbnail",
    ),
    *object_paths(views, "attachment", ["original", "caption", "delete"]),
]
