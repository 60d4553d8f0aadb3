"""Checking a photo and making the copies others may see, before anything is stored.

The upload's name and declared type are not trusted: its bytes are read (up to the size
limit), Pillow says what it is, the pixel count is checked from the header *before* any
decoding (decompression bombs), and then it is decoded whole (a truncated or corrupt
file is refused here, not half-stored). The copies anyone but the owner may receive are
built from the decoded pixels alone — turned upright by its EXIF orientation, colours
taken to sRGB, pasted into a fresh image and saved as a new JPEG — so no EXIF, GPS, XMP,
IPTC, comment or trailing byte of the original can survive into them.
"""

from __future__ import annotations

import hashlib
import io
import re
import unicodedata
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError
from PIL import Image, ImageCms, ImageOps, UnidentifiedImageError

# Pillow's format name → (media type, file extension) of the original.
FORMATS = {
    "JPEG": ("image/jpeg", "jpg"),
    "PNG": ("image/png", "png"),
    "WEBP": ("image/webp", "webp"),
    "HEIF": ("image/heic", "heic"),
}
DISPLAY_SIDE = 2560
THUMBNAIL_SIDE = 640
NOT_A_PHOTO = "That file is not a photo Keepsake can read: use a JPEG, PNG, WebP or HEIC picture."
DEFAULT_NAME = "photo"


@dataclass(frozen=True)
class PreparedImage:
    original: bytes
    media_type: str
    extension: str
    display: bytes
    thumbnail: bytes
    width: int
    height: int
    original_name: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.original).hexdigest()


def too_big_message() -> str:
    return f"A photo can be at most {settings.ATTACHMENT_MAX_BYTES // (1024 * 1024)} MB."


def too_many_pixels_message(size: str = "") -> str:
    return (
        f"That picture has too many pixels{size}; "
        f"at most {max(1, settings.ATTACHMENT_MAX_PIXELS // 1_000_000)} million."
    )


def clean_original_name(name: str | None) -> str:
    """The last part of a client's file name, without control characters: shown to the owner only.

    A name with path parts ("../../etc/passwd.jpg", "C:\\Users\\me\\IMG_1.HEIC") keeps its
    last part; it is never used to name anything stored.
    """
    name = re.split(r"[\\/]", name or "")[-1]
    name = "".join(char for char in name if unicodedata.category(char)[0] != "C").strip().strip(".")
    return name[:200] or DEFAULT_NAME


def _read_bounded(upload) -> bytes:
    limit = settings.ATTACHMENT_MAX_BYTES
    if getattr(upload, "size", None) is not None and upload.size > limit:
        raise ValidationError(too_big_message(), code="too_big")
    upload.seek(0)
    data = upload.read(limit + 1)
    if len(data) > limit:
        raise ValidationError(too_big_message(), code="too_big")
    if not data:
        raise ValidationError("That file is empty.", code="empty")
    return data


def _upright_srgb(image: Image.Image) -> Image.Image:
    """The first frame, upright, in sRGB, on white where it was transparent: pixels only."""
    image.seek(0)
    icc_profile = image.info.get("icc_profile")
    upright = ImageOps.exif_transpose(image)
    if upright.mode in ("RGBA", "LA", "PA") or (upright.mode == "P" and "transparency" in upright.info):
        rgba = upright.convert("RGBA")
        rgb = Image.new("RGB", rgba.size, (255, 255, 255))
        rgb.paste(rgba, mask=rgba.getchannel("A"))
    else:
        rgb = upright.convert("RGB")
    if icc_profile:
        try:
            rgb = ImageCms.profileToProfile(
                rgb, ImageCms.ImageCmsProfile(io.BytesIO(icc_profile)), ImageCms.createProfile("sRGB")
            )
        except (ImageCms.PyCMSError, OSError, ValueError):
            pass  # an unreadable profile: the pixels as they are
    # A fresh image holds nothing but pixels: no info dict, no EXIF, no XMP to carry over.
    fresh = Image.new("RGB", rgb.size)
    fresh.paste(rgb)
    return fresh


def _jpeg(image: Image.Image, side: int, quality: int) -> tuple[bytes, tuple[int, int]]:
    copy = image.copy()
    copy.thumbnail((side, side), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    copy.save(out, format="JPEG", quality=quality, optimize=True, progressive=True)
    return out.getvalue(), copy.size


def image_prepare(upload, *, name: str | None = None) -> PreparedImage:
    """The checked photo and its clean copies, or ValidationError saying why not (nothing stored)."""
    data = _read_bounded(upload)
    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.format not in FORMATS:
                raise ValidationError(NOT_A_PHOTO, code="type")
            width, height = image.size
            if width * height > settings.ATTACHMENT_MAX_PIXELS:
                raise ValidationError(too_many_pixels_message(f" ({width} × {height})"), code="pixels")
            media_type, extension = FORMATS[image.format]
            image.load()
            clean = _upright_srgb(image)
    except ValidationError:
        raise
    except Image.DecompressionBombError as error:
        # Pillow's own guard (far above ours) fired while reading the header.
        raise ValidationError(too_many_pixels_message(), code="pixels") from error
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError) as error:
        raise ValidationError(NOT_A_PHOTO, code="unreadable") from error
    display, (display_width, display_height) = _jpeg(clean, DISPLAY_SIDE, 85)
    thumbnail, _ = _jpeg(clean, THUMBNAIL_SIDE, 80)
    return PreparedImage(
        original=data,
        media_type=media_type,
        extension=extension,
        display=display,
        thumbnail=thumbnail,
        width=display_width,
        height=display_height,
        original_name=clean_original_name(name if name is not None else getattr(upload, "name", "")),
    )
