"""People's photos: checked, shrunk and re-encoded before anything is stored.

Only the decoded pixels are kept: the upload is opened with Pillow (its name and
declared type are not trusted), turned upright, cut to a square, scaled down and
saved as a fresh JPEG. Re-encoding drops everything else the file carried (EXIF,
GPS position, camera serials, comments, any trailing bytes).
"""

from __future__ import annotations

import io

from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from PIL import Image, ImageOps, UnidentifiedImageError

PHOTO_MAX_BYTES = 5 * 1024 * 1024
# Far more than any phone camera; refuses "decompression bombs" before decoding them.
PHOTO_MAX_PIXELS = 50_000_000
PHOTO_FORMATS = {"JPEG", "PNG", "WEBP", "GIF"}
PHOTO_SIZE = 512
PHOTO_TOO_BIG = f"A photo can be at most {PHOTO_MAX_BYTES // (1024 * 1024)} MB."
PHOTO_NOT_AN_IMAGE = "That file is not a photo Keepsake can read: use a JPEG, PNG, WebP or GIF."


def photo_prepare(upload) -> ContentFile:
    """A square JPEG of at most PHOTO_SIZE pixels a side, or ValidationError saying why not."""
    if upload.size > PHOTO_MAX_BYTES:
        raise ValidationError({"photo": PHOTO_TOO_BIG})
    try:
        upload.seek(0)
        with Image.open(upload) as image:
            if image.format not in PHOTO_FORMATS:
                raise ValidationError({"photo": PHOTO_NOT_AN_IMAGE})
            width, height = image.size
            if width * height > PHOTO_MAX_PIXELS:
                raise ValidationError({"photo": "That picture has too many pixels; use a smaller one."})
            image.load()
            upright = ImageOps.exif_transpose(image).convert("RGB")
            side = min(PHOTO_SIZE, *upright.size)  # never blown up past what was sent
            square = ImageOps.fit(upright, (side, side), Image.Resampling.LANCZOS)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError) as error:
        raise ValidationError({"photo": PHOTO_NOT_AN_IMAGE}) from error
    out = io.BytesIO()
    square.save(out, format="JPEG", quality=85, optimize=True)
    return ContentFile(out.getvalue(), name="photo.jpg")
