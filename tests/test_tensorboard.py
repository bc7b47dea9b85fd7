"""fusegrad.utils.tensorboard.SummaryWriter: the event files it writes, read
back by a TFRecord and protobuf reader of the test's own (CRCs checked), and
by TensorBoard's EventAccumulator where tensorboard is installed."""

import glob
import os
import socket
import struct
import sys
import zlib

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.utils.tensorboard import SummaryWriter
from fusegrad.utils.tensorboard.event_file import crc32c, masked_crc32c

# ------------------------------------------------------------------ the reader


def read_records(path: str) -> list[bytes]:
    """A TFRecord file's records, each length's and data's masked CRC-32C checked."""
    with open(path, "rb") as f:
        content = f.read()
    records, at = [], 0
    while at < len(content):
        header = content[at : at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", content[at + 8 : at + 12])
        assert length_crc == masked_crc32c(header)
        data = content[at + 12 : at + 12 + length]
        (data_crc,) = struct.unpack("<I", content[at + 12 + length : at + 16 + length])
        assert data_crc == masked_crc32c(data)
        records.append(data)
        at += 16 + length
    return records


def decode(message: bytes) -> dict:
    """A protobuf message as {field number: [values]}: varints as ints,
    fixed64 as doubles, fixed32 as floats, length-delimited as bytes."""
    fields: dict = {}
    at = 0

    def varint():
        nonlocal at
        value = shift = 0
        while True:
            byte = message[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    while at < len(message):
        key = varint()
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value = varint()
        elif wire_type == 1:
            (value,) = struct.unpack("<d", message[at : at + 8])
            at += 8
        elif wire_type == 5:
            (value,) = struct.unpack("<f", message[at : at + 4])
            at += 4
        else:
            assert wire_type == 2
            length = varint()
            value = message[at : at + length]
            at += length
        fields.setdefault(number, []).append(value)
    return fields


def packed_doubles(data: bytes) -> list:
    return list(struct.unpack(f"<{len(data) // 8}d", data))


def one(fields: dict, number: int, default=None):
    values = fields.get(number, [default])
    assert len(values) == 1
    return values[0]


def int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def events_in(directory) -> list[dict]:
    (path,) = glob.glob(os.path.join(directory, "events.out.tfevents.*"))
    return [decode(r) for r in read_records(path)]


def summary_values(directory) -> list[tuple]:
    """(step, wall time, decoded Summary.Value) of each summary's values."""
    found = []
    for event in events_in(directory):
        for summary in event.get(5, []):
            for value in decode(summary).get(1, []):
                found.append((int64(one(event, 2, 0)), one(event, 1), decode(value)))
    return found


def values_tagged(directory, tag: str) -> list[tuple]:
    return [
        (step, value) for step, _, value in summary_values(directory) if value[1] == [tag.encode()]
    ]


def plugin_name(value: dict) -> bytes:
    return one(decode(one(decode(one(value, 9)), 1)), 1)


def decode_png(png: bytes) -> np.ndarray:
    """H x W x C bytes of a PNG with 8-bit samples whose rows are unfiltered."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    at, chunks = 8, {}
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind, body = png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        assert struct.unpack(">I", png[at + 8 + length : at + 12 + length])[0] == zlib.crc32(
            kind + body
        )
        chunks[kind] = chunks.get(kind, b"") + body
        at += 12 + length
    width, height, depth, color_type = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    channels = {0: 1, 4: 2, 2: 3, 6: 4}[color_type]
    assert depth == 8
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(height, -1)
    assert (rows[:, 0] == 0).all()
    return rows[:, 1:].reshape(height, width, channels)


# --------------------------------------------------------------- the framing


def test_crc32c_is_castagnolis():
    assert crc32c(b"") == 0
    assert crc32c(b"123456789") == 0xE3069283  # the standard check value
    assert crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720's test vector


def test_crc32c_of_long_data_agrees_byte_by_byte():
    from fusegrad.utils.tensorboard import event_file

    data = np.random.RandomState(0).bytes(100_003)
    assert crc32c(data) == event_file._update(0xFFFFFFFF, data) ^ 0xFFFFFFFF


def test_file_name_and_first_event(tmp_path):
    with SummaryWriter(tmp_path, filename_suffix=".v2"):
        pass
    (path,) = glob.glob(str(tmp_path / "events.out.tfevents.*"))
    name = os.path.basename(path)
    _, _, _, stamp, *host, pid, number = name[: -len(".v2")].split(".")
    assert name.endswith(".v2") and len(stamp) == 10 and stamp.isdigit()
    assert ".".join(host) == socket.gethostname() and int(pid) == os.getpid()
    assert number.isdigit()
    (first,) = events_in(tmp_path)
    assert first[3] == [b"brain.Event:2"] and one(first, 1) > 1e9


def test_default_log_dir_is_runs_time_host_comment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    writer = SummaryWriter(comment="_lr0.1")
    writer.close()
    (run,) = os.listdir(tmp_path / "runs")
    assert run.endswith("_" + socket.gethostname() + "_lr0.1")
    assert writer.get_logdir() == os.path.join("runs", run)


# -------------------------------------------------------------------- scalars


def test_scalars_with_steps_and_wall_times(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        writer.add_scalar("loss", 0.5, 3, walltime=100.0)
        writer.add_scalar("loss", fg.tensor(0.25), 4)
        writer.add_scalar("loss", np.float64(0.0), -1)
    found = summary_values(tmp_path)
    assert [(step, one(value, 2)) for step, _, value in found] == [(3, 0.5), (4, 0.25), (-1, 0.0)]
    assert found[0][1] == 100.0


def test_a_scalar_must_have_one_element(tmp_path):
    with SummaryWriter(tmp_path) as writer, pytest.raises(ValueError, match="one element"):
        writer.add_scalar("loss", fg.ones(2), 0)


def test_new_style_scalar_is_a_tensor_of_the_scalars_plugin(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        writer.add_scalar("f", 1.5, 0, new_style=True)
        writer.add_scalar("d", 1.5, 0, new_style=True, double_precision=True)
    (_, f), (_, d) = values_tagged(tmp_path, "f") + values_tagged(tmp_path, "d")
    assert plugin_name(f) == plugin_name(d) == b"scalars"
    assert decode(one(f, 8)) == {1: [1], 5: [struct.pack("<f", 1.5)]}  # DT_FLOAT, float_val
    assert decode(one(d, 8)) == {1: [2], 6: [struct.pack("<d", 1.5)]}  # DT_DOUBLE, double_val


def test_add_scalars_writes_a_run_per_tag(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        writer.add_scalars("train/loss", {"a": 1.0, "b": 2.0}, 5)
        writer.add_scalars("train/loss", {"a": 3.0}, 6)
    assert {"train_loss_a", "train_loss_b"} <= set(os.listdir(tmp_path))
    a = values_tagged(tmp_path / "train_loss_a", "train/loss")
    assert [(step, one(v, 2)) for step, v in a] == [(5, 1.0), (6, 3.0)]
    assert [one(v, 2) for _, v in values_tagged(tmp_path / "train_loss_b", "train/loss")] == [2.0]


# ----------------------------------------------------------------- histograms


def test_histogram_buckets(tmp_path):
    values = np.array([0.5, 1.5, 1.5, 3.5])
    with SummaryWriter(tmp_path) as writer:
        writer.add_histogram("h", fg.tensor(values), 2, bins=[0.0, 1.0, 2.0, 3.0, 4.0])
    ((step, value),) = values_tagged(tmp_path, "h")
    histo = decode(one(value, 5))
    assert step == 2
    assert [one(histo, n) for n in (1, 2, 3, 4, 5)] == [0.5, 3.5, 4.0, 7.0, 0.25 + 4.5 + 12.25]
    # from the first counting bucket (with a zero bucket before it) to the last
    assert packed_doubles(one(histo, 6)) == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert packed_doubles(one(histo, 7)) == [0.0, 1.0, 2.0, 0.0, 1.0]


def test_histogram_with_tensorflow_bins_counts_every_value(tmp_path):
    values = np.random.RandomState(0).randn(1000)
    with SummaryWriter(tmp_path) as writer:
        writer.add_histogram("h", values, 0)
        writer.add_histogram("coarse", values, 0, max_bins=10)
    for tag in ("h", "coarse"):
        ((_, value),) = values_tagged(tmp_path, tag)
        histo = decode(one(value, 5))
        limits, counts = packed_doubles(one(histo, 6)), packed_doubles(one(histo, 7))
        assert sum(counts) == 1000 and len(limits) == len(counts)
        assert limits == sorted(limits) and limits[-1] >= values.max()
    assert len(counts) <= 10


def test_histogram_of_nothing_raises(tmp_path):
    with SummaryWriter(tmp_path) as writer, pytest.raises(ValueError, match="no element"):
        writer.add_histogram("h", np.array([]), 0)


# --------------------------------------------------------------------- images


def image_of(directory, tag):
    ((_, value),) = values_tagged(directory, tag)
    image = decode(one(value, 4))
    pixels = decode_png(one(image, 4))
    assert pixels.shape == (one(image, 1), one(image, 2), one(image, 3))
    return pixels


def test_images_in_each_layout(tmp_path):
    rng = np.random.RandomState(0)
    chw = rng.rand(3, 4, 5).astype(np.float32)
    rgba = (rng.rand(4, 5, 4) * 255).astype(np.uint8)
    grey = rng.rand(4, 5)
    with SummaryWriter(tmp_path) as writer:
        writer.add_image("chw", fg.tensor(chw), 0)
        writer.add_image("hwc", rgba, 0, dataformats="HWC")
        writer.add_image("hw", grey, 0, dataformats="HW")
    expected = (chw.transpose(1, 2, 0) * 255).astype(np.uint8)
    np.testing.assert_array_equal(image_of(tmp_path, "chw"), expected)
    np.testing.assert_array_equal(image_of(tmp_path, "hwc"), rgba)
    np.testing.assert_array_equal(
        image_of(tmp_path, "hw"), np.repeat((grey * 255).astype(np.uint8)[:, :, None], 3, 2)
    )


def test_a_batch_of_images_is_a_grid_of_eight_a_row(tmp_path):
    batch = np.arange(10, dtype=np.uint8).reshape(10, 1, 1, 1) * np.ones((1, 1, 2, 3), np.uint8)
    with SummaryWriter(tmp_path) as writer:
        writer.add_images("batch", batch, 0)
    grid = image_of(tmp_path, "batch")
    assert grid.shape == (4, 24, 3)
    assert grid[0, 3 * 7, 0] == 7 and grid[2, 3 * 1, 1] == 9 and grid[2, 3 * 2, 2] == 0


def test_image_layout_mismatch_raises(tmp_path):
    with SummaryWriter(tmp_path) as writer, pytest.raises(ValueError, match="dataformats"):
        writer.add_image("bad", np.zeros((3, 4)), 0)


def test_add_figure_needs_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with SummaryWriter(tmp_path) as writer, pytest.raises(ImportError, match="matplotlib"):
        writer.add_figure("figure", object(), 0)


def test_add_figure_draws_the_figure(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = plt.figure(figsize=(2, 1), dpi=50)
    with SummaryWriter(tmp_path) as writer:
        writer.add_figure("figure", figure, 0)
    assert image_of(tmp_path, "figure").shape == (50, 100, 3)


# ---------------------------------------------------------------- text, hparams


def test_text_is_a_string_tensor_of_the_text_plugin(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        writer.add_text("notes", "**héllo**", 7)
    ((step, value),) = values_tagged(tmp_path, "notes/text_summary")
    tensor = decode(one(value, 8))
    assert step == 7 and plugin_name(value) == b"text"
    assert one(tensor, 1) == 7  # DT_STRING
    assert decode(one(decode(one(tensor, 2)), 2)) == {1: [1]}  # shape [1]
    assert tensor[8] == ["**héllo**".encode()]


def test_hparams_write_a_run_of_their_own(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        writer.add_hparams(
            {"lr": 0.1, "optimizer": "adam", "skip": None}, {"accuracy": 0.75}, run_name="trial"
        )
    run = tmp_path / "trial"
    by_tag = {one(v, 1): v for _, _, v in summary_values(run)}
    assert set(by_tag) == {
        b"_hparams_/experiment",
        b"_hparams_/session_start_info",
        b"_hparams_/session_end_info",
        b"accuracy",
    }
    assert one(by_tag[b"accuracy"], 2) == 0.75
    content = {
        tag: decode(one(decode(one(decode(one(v, 9)), 1)), 2))
        for tag, v in by_tag.items()
        if tag.startswith(b"_hparams_")
    }
    start = decode(one(content[b"_hparams_/session_start_info"], 3))
    settings = {one(decode(e), 1): decode(one(decode(e), 2)) for e in start[1]}
    assert settings == {b"lr": {2: [0.1]}, b"optimizer": {3: [b"adam"]}}
    experiment = decode(one(content[b"_hparams_/experiment"], 2))
    infos = [decode(info) for info in experiment[4]]
    assert [(one(i, 1), one(i, 4)) for i in infos] == [(b"lr", 3), (b"optimizer", 1)]
    assert [decode(one(decode(m), 1)) for m in experiment[5]] == [{2: [b"accuracy"]}]
    assert decode(one(content[b"_hparams_/session_end_info"], 4)) == {1: [1]}  # success


def test_hparams_check_their_arguments(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        with pytest.raises(TypeError, match="should be dictionary"):
            writer.add_hparams([("lr", 0.1)], {})
        with pytest.raises(ValueError, match="value should be one of"):
            writer.add_hparams({"lr": [0.1]}, {})


# ------------------------------------------------------------- graph, embedding


def test_add_graph_writes_the_traced_forward(tmp_path):
    model = fg.nn.Sequential(fg.nn.Linear(4, 3), fg.nn.ReLU(), fg.nn.Linear(3, 2))
    with SummaryWriter(tmp_path) as writer:
        writer.add_graph(model, fg.randn(2, 4))
    (graph_def,) = [one(e, 4) for e in events_in(tmp_path) if 4 in e]
    nodes = [decode(n) for n in decode(graph_def)[1]]
    by_name = {one(n, 1): n for n in nodes}
    ops = [one(n, 2) for n in nodes]
    assert ops.count(b"matmul") == 2 and b"relu" in ops
    assert {b"input/input.0", b"output/output.0", b"Sequential/0/weight"} <= set(by_name)
    (relu,) = [n for n in nodes if one(n, 2) == b"relu"]
    assert all(i in by_name for i in relu[3])
    assert model.training  # traced in eval mode, and put back


def test_add_embedding_writes_the_projector_files(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        writer.add_embedding(
            fg.tensor([[1.0, 2.0], [3.0, 4.5]]),
            metadata=["a", "b"],
            label_img=fg.ones(2, 3, 4, 4),
            global_step=3,
            tag="points/x",
        )
    directory = tmp_path / "00003" / "points%2fx"
    assert (directory / "tensors.tsv").read_text() == "1.0\t2.0\n3.0\t4.5\n"
    assert (directory / "metadata.tsv").read_text() == "a\nb\n"
    assert decode_png((directory / "sprite.png").read_bytes()).shape == (8, 8, 3)
    config = (tmp_path / "projector_config.pbtxt").read_text()
    assert 'tensor_name: "points/x:00003"' in config
    assert 'tensor_path: "00003/points%2fx/tensors.tsv"' in config


# ------------------------------------------------- queueing, purge, reopening


def test_events_wait_for_max_queue_or_flush(tmp_path):
    writer = SummaryWriter(tmp_path, max_queue=3)
    writer.add_scalar("x", 1.0, 0)
    assert len(events_in(tmp_path)) == 1  # the file version only
    writer.add_scalar("x", 2.0, 1)
    writer.add_scalar("x", 3.0, 2)
    assert len(events_in(tmp_path)) == 4
    writer.add_scalar("x", 4.0, 3)
    writer.flush()
    assert len(events_in(tmp_path)) == 5
    writer.close()


def test_flush_secs_flushes_in_the_background(tmp_path):
    import time

    writer = SummaryWriter(tmp_path, flush_secs=0.05)
    writer.add_scalar("x", 1.0, 0)
    deadline = time.time() + 5
    while len(events_in(tmp_path)) < 2 and time.time() < deadline:
        time.sleep(0.02)
    assert len(events_in(tmp_path)) == 2
    writer.close()


def test_purge_step_starts_a_session_at_that_step(tmp_path):
    with SummaryWriter(tmp_path, purge_step=40) as writer:
        writer.add_scalar("x", 1.0, 40)
    events = events_in(tmp_path)
    assert events[1][3] == [b"brain.Event:2"] and one(events[1], 2) == 40
    assert decode(one(events[2], 7)) == {1: [1]} and one(events[2], 2) == 40  # SessionLog START


def test_writing_after_close_opens_a_new_file(tmp_path):
    writer = SummaryWriter(tmp_path)
    writer.close()
    writer.close()
    writer.add_scalar("x", 1.0, 0)
    writer.close()
    assert len(glob.glob(str(tmp_path / "events.out.tfevents.*"))) == 2


# ------------------------------------------- TensorBoard's own reader, if installed


def test_tensorboard_reads_the_files(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing import event_accumulator as ea

    with SummaryWriter(tmp_path) as writer:
        for step in range(3):
            writer.add_scalar("loss", 1.0 / (step + 1), step)
        writer.add_histogram("weights", np.arange(10.0), 0)
        writer.add_image("image", np.ones((3, 2, 2)), 0)
        writer.add_text("note", "hi", 0)
        writer.add_graph(fg.nn.Linear(2, 1), fg.ones(1, 2))
    everything = {kind: 0 for kind in (ea.SCALARS, ea.HISTOGRAMS, ea.IMAGES, ea.TENSORS)}
    accumulator = ea.EventAccumulator(str(tmp_path), size_guidance=everything)
    accumulator.Reload()
    assert [(e.step, e.value) for e in accumulator.Scalars("loss")] == [
        (0, 1.0),
        (1, 0.5),
        (2, pytest.approx(1 / 3)),
    ]
    histogram = accumulator.Histograms("weights")[0].histogram_value
    assert histogram.num == 10 and histogram.sum == 45 and sum(histogram.bucket) == 10
    image = accumulator.Images("image")[0]
    assert (image.width, image.height) == (2, 2)
    assert accumulator.Tensors("note/text_summary")[0].tensor_proto.string_val == [b"hi"]
    assert any(node.op == "matmul" for node in accumulator.Graph().node)
