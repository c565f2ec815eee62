"""Media types of assets: only raster images are kept, and only they are ever served inline (SVG
and HTML can carry scripts; an asset of any other type is a download)."""

from __future__ import annotations

RASTER_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp", "image/tiff"})
