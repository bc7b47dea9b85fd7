"""TensorBoard's ``Summary`` messages, each function returning one encoded:
what ``FileWriter.add_summary`` takes.

A ``Summary`` holds ``Value``s: a tag and one of a float (scalars), an
image, a histogram or a tensor; a value's metadata names the TensorBoard
plugin that shows it (text, hparams) and what that plugin needs to know.
"""

from __future__ import annotations

import functools

import numpy as np

from ...eager.tensor import Tensor
from . import images
from . import protobuf as pb

# TensorFlow's DataType numbers for a TensorProto's dtype
DT_FLOAT, DT_DOUBLE, DT_STRING = 1, 2, 7
# the hparams plugin's tags, its HParamInfo types and SessionEndInfo status
HPARAMS_EXPERIMENT_TAG = "_hparams_/experiment"
HPARAMS_SESSION_START_TAG = "_hparams_/session_start_info"
HPARAMS_SESSION_END_TAG = "_hparams_/session_end_info"
DATA_TYPE_STRING, DATA_TYPE_FLOAT64 = 1, 3
STATUS_SUCCESS = 1


def make_np(value) -> np.ndarray:
    """A tensor's values, a number as a 1-element array, an array as it is."""
    if isinstance(value, Tensor):
        value = value.detach()
        if value.dtype.name == "bfloat16":  # numpy has no bfloat16
            value = value.float()
        return value.numpy()
    if np.isscalar(value):
        return np.array([value])
    return np.asarray(value)


def summary(*values: bytes) -> bytes:
    return pb.repeated(1, values)


def value(tag: str, metadata: bytes = b"", **member: bytes | float) -> bytes:
    """A ``Summary.Value``: ``member`` is its one ``simple_value``, ``image``,
    ``histo`` or ``tensor`` (None of them: a value of metadata alone)."""
    fields = {"simple_value": 2, "image": 4, "histo": 5, "tensor": 8}
    encoded = b""
    for name, content in member.items():
        if name == "simple_value":
            encoded += pb.float32(fields[name], content, always=True)
        else:
            encoded += pb.data(fields[name], content, always=True)
    return pb.string(1, tag) + encoded + pb.data(9, metadata)


def plugin_metadata(plugin_name: str, content: bytes = b"") -> bytes:
    """``SummaryMetadata`` naming the plugin that shows a value."""
    return pb.data(1, pb.string(1, plugin_name) + pb.data(2, content), always=True)


def tensor_proto(dtype: int, shape=(), **values: bytes) -> bytes:
    """A ``TensorProto``: ``values`` its one encoded field of elements."""
    dims = [pb.integer(1, size) for size in shape]
    return pb.integer(1, dtype) + pb.data(2, pb.repeated(2, dims)) + b"".join(values.values())


# ---------------------------------------------------------------------- scalars


def scalar(
    name: str, scalar_value, new_style: bool = False, double_precision: bool = False
) -> bytes:
    """A number: as ``simple_value``, or (``new_style``) as a scalar tensor
    of the scalars plugin, float32 or (``double_precision``) float64."""
    array = make_np(scalar_value).squeeze()
    if array.ndim != 0:
        raise ValueError(
            f"a scalar should have one element, not {array.size} (shape {array.shape})"
        )
    number = float(array)
    if not new_style:
        return summary(value(name, simple_value=number))
    if double_precision:
        tensor = tensor_proto(DT_DOUBLE, double_val=pb.packed_doubles(6, [number]))
    else:
        tensor = tensor_proto(DT_FLOAT, float_val=pb.packed_floats(5, [number]))
    return summary(value(name, plugin_metadata("scalars"), tensor=tensor))


# ------------------------------------------------------------------- histograms


@functools.cache
def tensorflow_bins() -> list[float]:
    """TensorFlow's default bucket edges: 0 and ±1e-12 growing by 10% to 1e20."""
    edge, positive = 1e-12, []
    while edge < 1e20:
        positive.append(edge)
        edge *= 1.1
    return [-e for e in reversed(positive)] + [0.0] + positive


def histogram(name: str, values, bins, max_bins: int | None = None) -> bytes:
    return summary(value(name, histo=make_histogram(make_np(values).astype(float), bins, max_bins)))


def make_histogram(values: np.ndarray, bins, max_bins: int | None = None) -> bytes:
    """A ``HistogramProto`` of ``values`` over ``bins`` (np.histogram's):
    the buckets from one before the first that counts anything to the last
    that does, as TensorBoard draws a bucket from its left neighbour's limit."""
    values = values.reshape(-1)
    if values.size == 0:
        raise ValueError("The input has no element.")
    counts, limits = np.histogram(values, bins=bins)
    if max_bins is not None and len(counts) > max_bins:
        counts, limits = _merge_buckets(counts, limits, len(counts) // max_bins)
    nonempty = np.flatnonzero(counts)
    if nonempty.size == 0:
        raise ValueError("the histogram is empty: every value lies outside the bins")
    first, last = int(nonempty[0]), int(nonempty[-1])
    counts = (
        counts[first - 1 : last + 1] if first > 0 else np.concatenate([[0], counts[: last + 1]])
    )
    limits = limits[first : last + 2]
    return (
        pb.double(1, float(values.min()))
        + pb.double(2, float(values.max()))
        + pb.double(3, float(values.size))
        + pb.double(4, float(values.sum()))
        + pb.double(5, float(values.dot(values)))
        + pb.packed_doubles(6, limits.tolist())
        + pb.packed_doubles(7, counts.astype(float).tolist())
    )


def _merge_buckets(counts: np.ndarray, limits: np.ndarray, group: int):
    """Every ``group`` consecutive buckets as one, the last group padded
    with empty buckets."""
    padding = -len(counts) % group
    counts = np.pad(counts, (0, padding)).reshape(-1, group).sum(axis=1)
    limits = np.append(limits[:-1:group], limits[-1])
    return counts, limits


def histogram_raw(
    name: str, min, max, num, sum, sum_squares, bucket_limits, bucket_counts
) -> bytes:
    histo = (
        pb.double(1, min)
        + pb.double(2, max)
        + pb.double(3, num)
        + pb.double(4, sum)
        + pb.double(5, sum_squares)
        + pb.packed_doubles(6, list(bucket_limits))
        + pb.packed_doubles(7, list(bucket_counts))
    )
    return summary(value(name, histo=histo))


# ---------------------------------------------------------------- images, text


def image(tag: str, tensor, dataformats: str = "NCHW") -> bytes:
    """An image (a batch: a grid of them) as PNG; float pixels are taken to
    lie in [0, 1], uint8 ones in [0, 255]."""
    pixels = images.to_bytes(images.to_hwc(make_np(tensor), dataformats))
    height, width, channels = pixels.shape
    encoded = (
        pb.integer(1, height)
        + pb.integer(2, width)
        + pb.integer(3, channels)
        + pb.data(4, images.encode_png(pixels))
    )
    return summary(value(tag, image=encoded))


def text(tag: str, text: str) -> bytes:
    """Markdown for the text plugin: a string tensor of one element."""
    tensor = tensor_proto(DT_STRING, (1,), string_val=pb.repeated(8, [text.encode("utf-8")]))
    return summary(value(tag + "/text_summary", plugin_metadata("text"), tensor=tensor))


# ---------------------------------------------------------------------- hparams


def hparams(hparam_dict: dict, metric_dict: dict, hparam_domain_discrete: dict | None = None):
    """The hparams plugin's three summaries for one run: the experiment (each
    hyperparameter's type and domain, the metrics' tags), the session's start
    (the values) and its end."""
    if not isinstance(hparam_dict, dict):
        raise TypeError("parameter: hparam_dict should be a dictionary, nothing logged.")
    if not isinstance(metric_dict, dict):
        raise TypeError("parameter: metric_dict should be a dictionary, nothing logged.")
    domains = hparam_domain_discrete or {}
    if not isinstance(domains, dict):
        raise TypeError("parameter: hparam_domain_discrete should be a dictionary, nothing logged.")
    for key, domain in domains.items():
        if (
            key not in hparam_dict
            or not isinstance(domain, list)
            or not all(isinstance(d, type(hparam_dict[key])) for d in domain)
        ):
            raise TypeError(
                f"parameter: hparam_domain_discrete[{key}] should be a list of same type as "
                f"hparam_dict[{key}]."
            )
    infos, start_values = [], []
    for key, setting in hparam_dict.items():
        if setting is None:
            continue
        data_type, encode = _hparam_kind(setting)
        if isinstance(setting, Tensor):
            setting = float(make_np(setting).reshape(-1)[0])
        start_values.append(pb.string(1, key) + pb.data(2, encode(setting), always=True))
        info = pb.string(1, key) + pb.integer(4, data_type)
        if key in domains:
            info += pb.data(6, pb.repeated(1, [encode(d) for d in domains[key]]), always=True)
        infos.append(info)
    metrics = [pb.data(1, pb.string(2, tag), always=True) for tag in metric_dict]
    experiment = pb.repeated(4, infos) + pb.repeated(5, metrics)
    session_start = pb.repeated(1, start_values)
    session_end = pb.integer(1, STATUS_SUCCESS)
    return (
        _hparams_summary(HPARAMS_EXPERIMENT_TAG, pb.data(2, experiment, always=True)),
        _hparams_summary(HPARAMS_SESSION_START_TAG, pb.data(3, session_start, always=True)),
        _hparams_summary(HPARAMS_SESSION_END_TAG, pb.data(4, session_end, always=True)),
    )


def _hparam_kind(setting):
    """A hyperparameter's HParamInfo type, and how to encode its values as
    ``google.protobuf.Value``s. A bool is an int to Python, and so it is a
    number here, as in PyTorch's writer."""
    if isinstance(setting, (int, float, Tensor)):
        return DATA_TYPE_FLOAT64, lambda v: pb.double(2, float(v), always=True)
    if isinstance(setting, str):
        return DATA_TYPE_STRING, lambda v: pb.string(3, v, always=True)
    raise ValueError("value should be one of int, float, str, bool, or torch.Tensor")


def _hparams_summary(tag: str, plugin_data: bytes) -> bytes:
    """``plugin_data`` is the HParamsPluginData's member, its version 0 left out."""
    return summary(value(tag, plugin_metadata("hparams", plugin_data)))
