"""Serving photos: every byte through here, after the gate has said yes for its memory.

The owner gets the display copy and thumbnail, and may download the original under its
own name. Anyone else — a circle member to whom memories.gate shows the memory — gets
only the re-encoded copies (no EXIF, GPS, XMP; attachments/images.py) under a name that
says nothing. Anyone else again, signed in or not, gets the same 404 as for a photo
that does not exist. Agents never reach these views: they are session views, and the
API and MCP hand agents a count at most.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from attachments import selectors, services
from attachments.forms import CaptionForm
from attachments.storage import attachment_storage

GENERIC_NAMES = {"display": "photo.jpg", "thumbnail": "photo-thumbnail.jpg"}


def _stream(name: str) -> FileResponse:
    try:
        handle = attachment_storage().open(name, "rb")
    except FileNotFoundError as missing:
        raise Http404("No such photo.") from missing
    return FileResponse(handle)


def _private(response: HttpResponse, *, owner: bool) -> HttpResponse:
    # Never in a shared cache; for anyone but the owner not even in the browser's, so a
    # member who leaves or a consent revoked is not outlived by a cached copy.
    response["Cache-Control"] = "private, max-age=3600" if owner else "private, no-store"
    response["Cross-Origin-Resource-Policy"] = "same-origin"
    return response


@login_required
@require_GET
def attachment_file(request: HttpRequest, attachment_id, variant: str) -> HttpResponse:
    """The display copy or thumbnail (both re-encoded, without metadata) for a reader the gate allows."""
    attachment, is_owner = selectors.attachment_for_reader(attachment_id=attachment_id, reader=request.user)
    response = _stream(getattr(attachment, variant))
    response["Content-Type"] = "image/jpeg"
    response["Content-Disposition"] = f'inline; filename="{GENERIC_NAMES[variant]}"'
    return _private(response, owner=is_owner)


@login_required
@require_GET
def attachment_original(request: HttpRequest, attachment_id) -> HttpResponse:
    """The bytes as uploaded, under their own name: for the owner only (to others, no such photo)."""
    attachment = selectors.attachment_get_for_owner(owner=request.user, attachment_id=attachment_id)
    try:
        handle = attachment_storage().open(attachment.original, "rb")
    except FileNotFoundError as missing:
        raise Http404("No such photo.") from missing
    response = FileResponse(handle, as_attachment=True, filename=attachment.original_name)
    response["Content-Type"] = attachment.media_type
    return _private(response, owner=True)


@login_required
@require_POST
def attachment_caption(request: HttpRequest, attachment_id) -> HttpResponse:
    attachment = selectors.attachment_get_for_owner(owner=request.user, attachment_id=attachment_id)
    form = CaptionForm(request.POST)
    if form.is_valid():
        services.attachment_set_caption(attachment=attachment, caption=form.cleaned_data["caption"])
        messages.success(request, "Caption saved.")
    else:
        messages.error(request, "A caption can be at most 500 characters.")
    return redirect("memory_edit", memory_id=attachment.memory_id)


@login_required
@require_POST
def attachment_delete(request: HttpRequest, attachment_id) -> HttpResponse:
    attachment = selectors.attachment_get_for_owner(owner=request.user, attachment_id=attachment_id)
    memory_id = attachment.memory_id
    services.attachment_delete(attachment=attachment)
    messages.success(request, "Photo removed.")
    return redirect("memory_edit", memory_id=memory_id)
