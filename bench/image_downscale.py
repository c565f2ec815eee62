"""Peak memory of downscaling one image near the decode ceiling (the asset gate, ``assets.py``):
a striped PNG (RGB, RGBA, greyscale) and a TIFF of W×H pixels admitted under a pixel limit of a
quarter of that, each in a fresh process (its peak RSS growth is what the parse child would need).

    .venv/bin/python -m bench.image_downscale [--side 6000]
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_CHILD = """
import sys, time
from ultimate_rag.adapters.parsers.assets import AssetGate
from ultimate_rag.adapters.parsers.limits import ParseLimits
from ultimate_rag.domain.models import ParsedAsset

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024

data = open(sys.argv[1], "rb").read()
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # resets the peak resident size (VmHWM) to the current one
before = status("VmRSS")
start = time.perf_counter()
gate = AssetGate(ParseLimits(max_image_pixels=int(sys.argv[2])))
asset = gate.admit(ParsedAsset("k", data, "image/png"), "the image")
print(f"{status('VmHWM') - before:.0f} {time.perf_counter() - start:.2f} {'kept' if asset else 'left out'}")
"""


def images(side: int, directory: Path) -> list[Path]:
    from PIL import Image, ImageDraw

    base = Image.new("RGB", (side, side), "white")
    draw = ImageDraw.Draw(base)
    for i in range(0, side, 50):
        draw.line((0, i, side, side - i), fill=(i % 255, 80, 160), width=3)
    paths = []
    for name, image, fmt in (("rgb.png", base, "PNG"), ("rgba.png", base.convert("RGBA"), "PNG"),
                             ("grey.png", base.convert("L"), "PNG"), ("rgb.tif", base, "TIFF")):
        out = io.BytesIO()
        image.save(out, fmt, **({"compression": "tiff_deflate"} if fmt == "TIFF" else {}))
        path = directory / name
        path.write_bytes(out.getvalue())
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--side", type=int, default=6000)
    args = parser.parse_args()
    limit = args.side * args.side * 100 // 390  # the image is 3.9× the limit
    print(f"{args.side}×{args.side} pixels, limit {limit} pixels (3.9×); peak resident size growth while admitted")
    print("| image | peak MB | seconds | outcome |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for path in images(args.side, Path(tmp)):
            started = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(limit)], capture_output=True,
                                 text=True, check=False)
            line = out.stdout.strip().split() or ["-", f"{time.perf_counter() - started:.2f}", out.stderr[-80:]]
            print(f"| {path.name} | {line[0]} | {line[1]} | {' '.join(line[2:])} |")


if __name__ == "__main__":
    main()
