"""Test photos: real images carrying the metadata a phone writes (EXIF camera and time, GPS, XMP)."""

from __future__ import annotations

import io

from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import Image

SECRET_NAME = "IMG_20260331_GRANDMA_HOUSE.jpg"
XMP = (
    b'<?xpacket begin="" id="W5M0MpCehiHzreSzNTczkc9d"?><x:xmpmeta xmlns:x="adobe:ns:meta/">'
    b'<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description '
    b'xmlns:photoshop="http://ns.adobe.com/photoshop/1.0/" photoshop:City="SECRETVILLE"/>'
    b'</rdf:RDF></x:xmpmeta><?xpacket end="w"?>'
)
CAMERA = "SECRETCAM 9000"


def exif_with_gps(*, orientation: int = 1) -> Image.Exif:
    exif = Image.Exif()
    exif[0x010F] = "SecretMaker"  # Make
    exif[0x0110] = CAMERA  # Model
    exif[0x0132] = "2026:03:31 10:11:12"  # DateTime
    exif[0x0112] = orientation
    gps = exif.get_ifd(0x8825)
    gps[1] = "N"
    gps[2] = (48.0, 51.0, 24.0)
    gps[3] = "E"
    gps[4] = (2.0, 21.0, 7.0)
    return exif


def image_bytes(
    fmt: str = "JPEG",
    *,
    size: tuple[int, int] = (64, 48),
    color=(200, 30, 30),
    metadata: bool = True,
    orientation: int = 1,
    mode: str = "RGB",
) -> bytes:
    image = Image.new(mode, size, color)
    # A left half of another colour: orientation can be told from the pixels.
    image.paste((20, 20, 220) if mode == "RGB" else (20, 20, 220, 255), (0, 0, size[0] // 2, size[1]))
    out = io.BytesIO()
    kwargs = {}
    if metadata:
        kwargs["exif"] = exif_with_gps(orientation=orientation).tobytes()
        if fmt in ("JPEG", "WEBP", "PNG"):
            kwargs["xmp"] = XMP
    image.save(out, format=fmt, **kwargs)
    return out.getvalue()


def upload(data: bytes | None = None, name: str = SECRET_NAME, content_type: str = "image/jpeg"):
    return SimpleUploadedFile(name, image_bytes() if data is None else data, content_type=content_type)


def assert_clean(served: bytes, *, original_name: str = SECRET_NAME) -> None:
    """No EXIF, GPS, XMP, camera or original name in these bytes, and they are a readable JPEG."""
    for marker in (
        b"Exif",
        b"SecretMaker",
        CAMERA.encode(),
        b"SECRETVILLE",
        b"xmpmeta",
        b"http://ns.adobe.com",
    ):
        assert marker not in served, marker
    stem = original_name.rsplit(".", 1)[0].encode()
    assert stem not in served
    with Image.open(io.BytesIO(served)) as image:
        assert image.format == "JPEG"
        assert not image.getexif()
        assert "xmp" not in image.info and "exif" not in image.info
        assert not image.getexif().get_ifd(0x8825)
