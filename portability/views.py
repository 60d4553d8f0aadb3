from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render, resolve_url
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from config.pages import go_to, render_page
from portability import selectors, services
from portability.forms import AccountDeleteForm, ImportForm
from portability.models import ImportJob

IMPORT_JOBS_SHOWN = 20


def job_url(job: ImportJob) -> str:
    return reverse("import_job_detail", kwargs={"job_id": job.pk})


def _settings_page(
    request: HttpRequest,
    *,
    import_form: ImportForm | None = None,
    delete_form: AccountDeleteForm | None = None,
    status: int = 200,
    partial: bool = False,
) -> HttpResponse:
    jobs = list(selectors.import_job_list(owner=request.user)[:IMPORT_JOBS_SHOWN])
    template = "portability/settings.html" + ("#import-list" if partial else "")
    context = {
        "import_form": import_form or ImportForm(),
        "delete_form": delete_form or AccountDeleteForm(),
        "jobs": jobs,
        "any_job_active": any(job.is_active for job in jobs),
    }
    return render(request, template, context, status=status)


@login_required
@require_GET
def settings_page(request: HttpRequest) -> HttpResponse:
    # htmx polls only the list of imports (while one is running).
    return _settings_page(request, partial=bool(request.htmx))


@login_required
@require_GET
def export_json(request: HttpRequest) -> HttpResponse:
    document = selectors.export_json(owner=request.user)
    response = JsonResponse(document, json_dumps_params={"indent": 2, "ensure_ascii": False})
    filename = selectors.export_filename(owner=request.user, extension="json")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
@require_GET
def export_markdown(request: HttpRequest) -> HttpResponse:
    archive = selectors.export_markdown_zip(owner=request.user)
    filename = selectors.export_filename(owner=request.user, extension="zip")
    return HttpResponse(
        archive,
        content_type="application/zip",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


@login_required
@require_POST
def import_upload(request: HttpRequest) -> HttpResponse:
    form = ImportForm(request.POST, request.FILES)
    if form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            job = services.import_start(owner=request.user, filename=upload.name, content=upload.read())
        except ValidationError as error:
            form.add_error("file", error.messages)
        else:
            messages.success(request, f"Importing {job.filename}: you can leave this page and come back.")
            return go_to(request, job_url(job))
    # The full page, with or without htmx: the upload form is a plain multipart form.
    return _settings_page(request, import_form=form, status=400)


@login_required
@require_GET
def import_job_detail(request: HttpRequest, job_id) -> HttpResponse:
    job = selectors.import_job_get(owner=request.user, job_id=job_id)
    return render_page(request, "portability/import_job.html", "import-progress", {"job": job})


@login_required
@require_POST
def import_job_resume(request: HttpRequest, job_id) -> HttpResponse:
    job = selectors.import_job_get(owner=request.user, job_id=job_id)
    try:
        services.import_resume(job=job)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
    else:
        messages.success(request, "Import resumed: it continues where it stopped.")
    return go_to(request, job_url(job))


@login_required
@require_POST
def account_delete(request: HttpRequest) -> HttpResponse:
    form = AccountDeleteForm(request.POST)
    if form.is_valid():
        try:
            services.account_delete(user=request.user, password=form.cleaned_data["password"])
        except ValidationError as error:
            form.add_error("password" if hasattr(error, "error_dict") else None, error.messages)
        else:
            logout(request)
            messages.success(request, "Your account and everything in it has been deleted.")
            after = resolve_url(settings.LOGOUT_REDIRECT_URL)
            return go_to(request, after)
    return _settings_page(request, delete_form=form, status=400)
