from __future__ import annotations

from django.urls import path

from attachments import views

urlpatterns = [
    path("<uuid:attachment_id>/", views.attachment_file, {"variant": "display"}, name="attachment_display"),
    path(
        "<uuid:attachment_id>/thumbnail/",
        views.attachment_file,
        {"variant": "thumbnail"},
        name="attachment_thumbnail",
    ),
    path("<uuid:attachment_id>/original/", views.attachment_original, name="attachment_original"),
    path("<uuid:attachment_id>/caption/", views.attachment_caption, name="attachment_caption"),
    path("<uuid:attachment_id>/delete/", views.attachment_delete, name="attachment_delete"),
]
