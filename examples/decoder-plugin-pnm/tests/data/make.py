"""Makes the PNM test files and their reference pixels (run once; the outputs are committed).

Sources: data/samples/opencv_orange.jpg (OpenCV sample data, see data/samples/ATTRIBUTION.md),
resized to 64x48 by Pillow. References: Pillow 13's own PPM/PGM reader for the 8-bit files;
round(v * 255 / maxval) computed by NumPy for the 16-bit and maxval-1000 files.
Run: python make.py (needs numpy and Pillow).
"""
from pathlib import Path

import numpy as np
from PIL import Image

here = Path(__file__).parent
src = Image.open(here / "../../../../data/samples/opencv_orange.jpg").convert("RGB").resize((64, 48))
src.save(here / "orange.ppm")
np.save(here / "orange_rgb.npy", np.asarray(Image.open(here / "orange.ppm").convert("RGB")))
src.convert("L").save(here / "orange.pgm")
np.save(here / "orange_pgm_rgb.npy", np.asarray(Image.open(here / "orange.pgm").convert("RGB")))

gray = np.asarray(src.convert("L")).astype(np.uint32)
deep = (gray * 257 + np.arange(48)[:, None]).astype(">u2")  # 16-bit, maxval 65535
(here / "deep.pgm").write_bytes(b"P5\n# 16-bit gradient\n64 48\n65535\n" + deep.tobytes())
np.save(here / "deep_gray.npy", np.floor(deep / 257 + 0.5).astype(np.uint8))

low = (gray * 1000 // 255).astype(">u2")  # maxval 1000: two bytes per sample
(here / "maxval1000.pgm").write_bytes(b"P5 64 48 1000\n" + low.tobytes())
np.save(here / "maxval1000_gray.npy", np.floor(low.astype(np.float64) * 255 / 1000 + 0.5).astype(np.uint8))
