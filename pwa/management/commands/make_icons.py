"""Draw the app's PNG icons from the favicon's shape (static/img/favicon.svg) with Pillow.

The PNGs are committed (static/img/icon-*.png); run this again after changing the shape.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand
from PIL import Image, ImageDraw

ACCENT = (47, 93, 98)
PAPER = (247, 244, 238)
SIZES = {"icon-192.png": (192, False), "icon-512.png": (512, False), "icon-maskable-512.png": (512, True)}


def _diamond(draw: ImageDraw.ImageDraw, centre: float, reach: float, *, fill: tuple[int, int, int]) -> None:
    """A square on its point, `reach` from the centre to each corner."""
    corners = [
        (centre, centre - reach),
        (centre + reach, centre),
        (centre, centre + reach),
        (centre - reach, centre),
    ]
    draw.polygon(corners, fill=fill)


def draw_icon(size: int, *, maskable: bool) -> Image.Image:
    """The diamond in a rounded square; a maskable icon fills the square and keeps the
    diamond inside the middle 80% (the safe zone a launcher may crop to)."""
    scale = 4  # drawn large, then reduced: smooth edges
    big = size * scale
    image = Image.new("RGBA", (big, big), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    if maskable:
        draw.rectangle((0, 0, big, big), fill=ACCENT)
    else:
        draw.rounded_rectangle((0, 0, big - 1, big - 1), radius=big * 14 // 64, fill=ACCENT)
    centre, reach = big / 2, big * (22 / 64) * (0.8 if maskable else 1)
    _diamond(draw, centre, reach, fill=PAPER)
    _diamond(draw, centre, reach / 2, fill=ACCENT)
    return image.resize((size, size), Image.LANCZOS)


class Command(BaseCommand):
    help = "Draw static/img/icon-*.png (the installable app's icons)."

    def handle(self, *args, **options) -> None:
        folder = Path(settings.BASE_DIR) / "static" / "img"
        for name, (size, maskable) in SIZES.items():
            draw_icon(size, maskable=maskable).save(folder / name, optimize=True)
            self.stdout.write(f"wrote {folder / name}")
