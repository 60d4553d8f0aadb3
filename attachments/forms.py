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


# Two hidden markers of the memory forms: one just before the photo input, one as the
# form's last field. Browsers send fields in the order of the page, so a body cut off
# halfway (a dropped connection) has the first and not the second — and Django's parser
# silently drops a file part that never ended, which must not leave a memory saved
# without the photos it was sent with.
PHOTOS_BEGIN = "photos_begin"
FORM_END = "form_end"
INTERRUPTED = "The upload was interrupted before it finished; nothing was saved. Please send it again."


class MemoryPhotosForm(forms.Form):
    """Photos added with a memory (capture and edit). Checked before anything is written."""

    photos = PhotosField(label="Photos")

    def clean(self) -> dict:
        cleaned = super().clean()
        if PHOTOS_BEGIN in self.data and FORM_END not in self.data:
            raise ValidationError(INTERRUPTED, code="interrupted")
        return cleaned


class CaptionForm(forms.Form):
    caption = forms.CharField(max_length=500, required=False, label="Caption")
