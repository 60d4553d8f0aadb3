"""The photo inputs of the memory forms: several files, each checked by attachments.images."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError

from attachments.images import PreparedImage, image_prepare
from attachments.services import too_many_message


class MultiplePhotoInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class PhotosField(forms.FileField):
    widget = MultiplePhotoInput

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)
        self.widget.attrs.update({"accept": "image/*", "multiple": True, "data-photo-input": True})

    def clean(self, data, initial=None) -> list[PreparedImage]:
        files = [item for item in (data if isinstance(data, list | tuple) else [data]) if item]
        if len(files) > settings.ATTACHMENTS_PER_MEMORY:
            raise ValidationError(too_many_message(), code="too_many")
        prepared, errors = [], []
        for upload in files:
            try:
                prepared.append(image_prepare(upload))
            except ValidationError as error:
                name = getattr(upload, "name", "") or "A file"
                errors.extend(f"{name[-80:]}: {message}" for message in error.messages)
        if errors:
            raise ValidationError(errors)
        return prepared


class MemoryPhotosForm(forms.Form):
    """Photos added with a memory (capture and edit). Checked before anything is written."""

    photos = PhotosField(label="Photos")


class CaptionForm(forms.Form):
    caption = forms.CharField(max_length=500, required=False, label="Caption")
