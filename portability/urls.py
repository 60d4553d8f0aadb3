from __future__ import annotations

from django.urls import path

from accounts import views as account_views
from config.routes import object_paths
from portability import views

urlpatterns = [
    path("", views.settings_page, name="settings"),
    path("export/keepsake.json", views.export_json, name="export_json"),
    path("export/memories.zip", views.export_markdown, name="export_markdown"),
    path("import/", views.import_upload, name="import_upload"),
    *object_paths(views, "import_job", ["detail", "resume"], prefix="imports/", id_name="job_id"),
    path("delete-account/", views.account_delete, name="account_delete"),
    path("tokens/", account_views.token_list, name="token_list"),
    path("tokens/<uuid:token_id>/revoke/", account_views.token_revoke, name="token_revoke"),
]
