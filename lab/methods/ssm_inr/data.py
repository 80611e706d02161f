"""The data the representations fit, one datum per fit: ``skimage.data`` images (shipped inside scikit-image) and a
short synthetic video of moving shapes generated with NumPy. Nothing is downloaded.

Every datum is ``(frames, 3, size, size)`` float32 in [0, 1] (an image is one frame; grey images are repeated over
the three channels so that every datum has the same shape and the same models fit it).
"""

from __future__ import annotations

import numpy as np

from lab.cache import memo
from lab.checks import bad_value, check_choice

__all__ = ["DATA", "IMAGES", "VIDEO", "load", "max_size"]

#: skimage.data images offered, with the short side of the stored image (a size must fit in it)
IMAGES = {"camera": 512, "astronaut": 512, "coffee": 400, "chelsea": 300, "rocket": 427, "coins": 303,
          "moon": 512}
VIDEO = "shapes_video"
DATA = (*IMAGES, VIDEO)
#: the video is generated at any size up to this
VIDEO_MAX = 512


def max_size(name: str) -> int:
    """The largest square side the datum ``name`` can hold."""
    check_choice("datum", name, DATA)
    return VIDEO_MAX if name == VIDEO else IMAGES[name]


def _image(name: str, size: int) -> np.ndarray:
    import skimage.data
    from skimage.transform import resize

    img = np.asarray(getattr(skimage.data, name)(), dtype=np.float64)
    if img.max() > 1:
        img = img / 255.0
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=-1)
    img = img[..., :3]
    h, w = img.shape[:2]
    side = min(h, w)
    top, left = (h - side) // 2, (w - side) // 2
    img = img[top: top + side, left: left + side]  # the central square
    img = resize(img, (size, size), anti_aliasing=True)  # (size, size, 3)
    return np.clip(img, 0, 1).transpose(2, 0, 1)[None].astype(np.float32)


def _video(size: int, frames: int) -> np.ndarray:
    """A soft-edged disc, square and bar crossing a colour gradient, moving one step per frame."""
    y, x = np.mgrid[0:size, 0:size] / size  # (size, size) in [0, 1)
    edge = 1.5 / size

    def soft(d):  # inside where d < 0, a one-pixel soft edge
        return 1 / (1 + np.exp(np.clip(d / edge, -50, 50)))

    out = np.zeros((frames, 3, size, size))
    for t in range(frames):
        s = t / max(frames - 1, 1)
        frame = np.stack([0.25 + 0.5 * x, 0.2 + 0.3 * y, 0.6 - 0.3 * x * y])
        disc = soft(np.hypot(x - (0.2 + 0.6 * s), y - 0.35) - 0.14)
        square = soft(np.maximum(np.abs(x - 0.7 + 0.4 * s), np.abs(y - (0.3 + 0.4 * s))) - 0.1)
        bar = soft(np.abs((x - 0.5) * np.cos(np.pi * s) + (y - 0.75) * np.sin(np.pi * s)) - 0.03) * soft(
            np.hypot(x - 0.5, y - 0.75) - 0.2)
        for mask, colour in ((disc, (0.95, 0.85, 0.2)), (square, (0.15, 0.6, 0.3)), (bar, (0.8, 0.1, 0.2))):
            frame = frame * (1 - mask) + mask * np.asarray(colour)[:, None, None]
        out[t] = frame
    return np.clip(out, 0, 1).astype(np.float32)


@memo(maxsize=32)
def load(name: str, size: int, frames: int = 8) -> np.ndarray:
    """The datum ``name`` as ``(frames, 3, size, size)`` float32 in [0, 1] (images: one frame).

    Raises ConfigError for an unknown name or a size the datum cannot hold.
    """
    limit = max_size(name)
    if not isinstance(size, (int, np.integer)) or not 8 <= size <= limit:
        raise bad_value("size", size, f"an integer in [8, {limit}] for {name!r}")
    return _video(int(size), int(frames)) if name == VIDEO else _image(name, int(size))
