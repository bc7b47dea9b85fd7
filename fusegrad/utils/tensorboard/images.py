"""Images for TensorBoard: arrays in a layout named by letters (``"CHW"``,
``"NHWC"``) as height x width x channels bytes, encoded as PNG with zlib."""

from __future__ import annotations

import math
import struct
import zlib

import numpy as np

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# PNG's colour type for a number of channels: grey, grey + alpha, RGB, RGBA
_COLOR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}


def to_hwc(array: np.ndarray, dataformats: str) -> np.ndarray:
    """``array``, laid out as ``dataformats`` says, as height x width x
    channels: a batch (N) becomes a grid of up to 8 images a row, one channel
    or none becomes three equal ones (grey as RGB)."""
    dataformats = dataformats.upper()
    if len(set(dataformats)) != len(dataformats):
        raise ValueError(f"dataformats {dataformats!r} names a dimension twice")
    if array.ndim != len(dataformats):
        raise ValueError(
            f"the image has {array.ndim} dimensions {tuple(array.shape)} but dataformats "
            f"{dataformats!r} names {len(dataformats)}"
        )
    if len(dataformats) == 4:
        batch = array.transpose([dataformats.index(c) for c in "NCHW"])
        return make_grid(batch).transpose(1, 2, 0)
    if len(dataformats) == 3:
        hwc = array.transpose([dataformats.index(c) for c in "HWC"])
        return np.repeat(hwc, 3, axis=2) if hwc.shape[2] == 1 else hwc
    if len(dataformats) == 2:
        return np.repeat(array.transpose([dataformats.index(c) for c in "HW"])[:, :, None], 3, 2)
    raise ValueError(f"dataformats {dataformats!r} should have 2, 3 or 4 letters")


def make_grid(images: np.ndarray, ncols: int = 8) -> np.ndarray:
    """N x C x H x W images (C 1 or 3) tiled row by row on a 3 x H' x W'
    canvas of ``ncols`` columns (fewer if there are fewer images)."""
    if images.shape[1] == 1:
        images = np.repeat(images, 3, axis=1)
    if images.ndim != 4 or images.shape[1] != 3:
        raise ValueError(
            f"a batch of images should be N x C x H x W with 1 or 3 channels, not "
            f"{tuple(images.shape)}"
        )
    count, _, height, width = images.shape
    ncols = min(count, ncols)
    nrows = math.ceil(count / ncols)
    canvas = np.zeros((3, height * nrows, width * ncols), dtype=images.dtype)
    for i, image in enumerate(images):
        row, col = divmod(i, ncols)
        canvas[:, row * height : (row + 1) * height, col * width : (col + 1) * width] = image
    return canvas


def to_bytes(hwc: np.ndarray) -> np.ndarray:
    """Pixel values as bytes: uint8 as they are, anything else taken to lie
    in [0, 1] and scaled by 255, clipped."""
    if hwc.dtype == np.uint8:
        return hwc
    return (hwc.astype(np.float32) * 255).clip(0, 255).astype(np.uint8)


def encode_png(pixels: np.ndarray) -> bytes:
    """H x W x C bytes (C from 1 to 4) as a PNG file: 8 bits a sample, rows
    unfiltered, deflated by zlib."""
    height, width, channels = pixels.shape
    if channels not in _COLOR_TYPES:
        raise ValueError(f"an image should have 1 to 4 channels, not {channels}")
    rows = pixels.reshape(height, width * channels)
    scanlines = np.concatenate([np.zeros((height, 1), np.uint8), rows], axis=1)  # filter: none
    header = struct.pack(">IIBBBBB", width, height, 8, _COLOR_TYPES[channels], 0, 0, 0)
    return (
        PNG_SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(scanlines.tobytes()))
        + _chunk(b"IEND", b"")
    )


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def figure_to_image(figures, close: bool = True) -> np.ndarray:
    """A matplotlib figure drawn as a 3 x H x W uint8 array (a list of
    figures: N x 3 x H x W)."""
    try:
        import matplotlib.pyplot as plt
        from matplotlib.backends.backend_agg import FigureCanvasAgg
    except ImportError:
        raise ImportError(
            "SummaryWriter.add_figure needs matplotlib, which is not installed "
            "(pip install matplotlib)"
        ) from None

    def draw(figure) -> np.ndarray:
        canvas = FigureCanvasAgg(figure)
        canvas.draw()
        rgba = np.asarray(canvas.buffer_rgba())
        if close:
            plt.close(figure)
        return rgba[:, :, :3].transpose(2, 0, 1).copy()

    if isinstance(figures, list):
        return np.stack([draw(figure) for figure in figures])
    return draw(figures)
