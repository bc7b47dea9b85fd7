"""``SummaryWriter``: logs scalars, histograms, images, text, hyperparameters,
a model's graph and embeddings where TensorBoard reads them, as
``torch.utils.tensorboard.SummaryWriter`` does."""

from __future__ import annotations

import os
import socket
import time
from datetime import datetime

import numpy as np

from . import event_file, images
from . import graph as graphs
from . import protobuf as pb
from . import summary as summaries
from .event_file import EventFileWriter

SESSION_START = 1  # SessionLog.status: a restart, which hides the events of later steps


class FileWriter:
    """Writes ``Event``s holding summaries or a graph to one event file in
    ``log_dir``."""

    def __init__(
        self, log_dir, max_queue: int = 10, flush_secs: float = 120, filename_suffix: str = ""
    ):
        self.event_writer = EventFileWriter(str(log_dir), max_queue, flush_secs, filename_suffix)

    def get_logdir(self) -> str:
        return self.event_writer.get_logdir()

    def add_summary(self, summary: bytes, global_step=None, walltime=None) -> None:
        """``summary``: an encoded ``Summary``, as the functions of
        ``fusegrad.utils.tensorboard.summary`` return."""
        self._add(global_step, walltime, summary=summary)

    def add_graph(self, graph_def: bytes, walltime=None) -> None:
        self._add(None, walltime, graph_def=graph_def)

    def add_session_start(self, step: int) -> None:
        self._add(step, None, file_version=event_file.FILE_VERSION.encode())
        self._add(step, None, session_log=pb.integer(1, SESSION_START))

    def _add(self, step, walltime, **what: bytes) -> None:
        wall_time = time.time() if walltime is None else walltime
        step = None if step is None else int(step)
        self.event_writer.add_event(event_file.event(wall_time, step, **what))

    def flush(self) -> None:
        self.event_writer.flush()

    def close(self) -> None:
        self.event_writer.close()


class SummaryWriter:
    """Writes event files into ``log_dir`` (by default
    ``runs/<month><day>_<hour>-<minute>-<second>_<host><comment>``), which
    ``tensorboard --logdir runs`` shows.

    ``purge_step``: the run restarted from this step (after a crash): TensorBoard
    hides the events logged before with this step or a later one.
    Events are written once ``max_queue`` are pending, every ``flush_secs``,
    and on ``flush()`` and ``close()``.
    """

    def __init__(
        self,
        log_dir=None,
        comment: str = "",
        purge_step: int | None = None,
        max_queue: int = 10,
        flush_secs: float = 120,
        filename_suffix: str = "",
    ):
        if not log_dir:
            started = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{started}_{socket.gethostname()}{comment}")
        self.log_dir = log_dir
        self.purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        self.file_writer = self.all_writers = None
        self._projector_embeddings: list[str] = []
        self._get_file_writer()

    def _get_file_writer(self) -> FileWriter:
        """The writer of the run's own event file, opened again after ``close()``."""
        if self.file_writer is None:
            self.file_writer = self._new_file_writer(self.log_dir)
            self.all_writers = {self.file_writer.get_logdir(): self.file_writer}
            if self.purge_step is not None:
                self.file_writer.add_session_start(self.purge_step)
                self.purge_step = None
        return self.file_writer

    def _new_file_writer(self, log_dir) -> FileWriter:
        return FileWriter(log_dir, self.max_queue, self.flush_secs, self.filename_suffix)

    def get_logdir(self):
        return self.log_dir

    # ------------------------------------------------------------------ scalars

    def add_scalar(
        self,
        tag: str,
        scalar_value,
        global_step=None,
        walltime=None,
        new_style: bool = False,
        double_precision: bool = False,
    ) -> None:
        summary = summaries.scalar(tag, scalar_value, new_style, double_precision)
        self._get_file_writer().add_summary(summary, global_step, walltime)

    def add_scalars(
        self, main_tag: str, tag_scalar_dict: dict, global_step=None, walltime=None
    ) -> None:
        """Each scalar under ``main_tag`` in a run of its own,
        ``<log_dir>/<main_tag>_<tag>``, so TensorBoard draws them on one chart."""
        walltime = time.time() if walltime is None else walltime
        log_dir = self._get_file_writer().get_logdir()
        for tag, scalar_value in tag_scalar_dict.items():
            run = f"{log_dir}/{main_tag.replace('/', '_')}_{tag}"
            if run not in self.all_writers:
                self.all_writers[run] = self._new_file_writer(run)
            summary = summaries.scalar(main_tag, scalar_value)
            self.all_writers[run].add_summary(summary, global_step, walltime)

    # --------------------------------------------------------------- histograms

    def add_histogram(
        self,
        tag: str,
        values,
        global_step=None,
        bins="tensorflow",
        walltime=None,
        max_bins: int | None = None,
    ) -> None:
        """``bins``: "tensorflow" (TensorFlow's exponential buckets), or what
        ``numpy.histogram`` takes (a count, edges, a method's name)."""
        if isinstance(bins, str) and bins == "tensorflow":
            bins = summaries.tensorflow_bins()
        summary = summaries.histogram(tag, values, bins, max_bins)
        self._get_file_writer().add_summary(summary, global_step, walltime)

    def add_histogram_raw(
        self,
        tag: str,
        min,
        max,
        num,
        sum,
        sum_squares,
        bucket_limits,
        bucket_counts,
        global_step=None,
        walltime=None,
    ) -> None:
        if len(bucket_limits) != len(bucket_counts):
            raise ValueError("len(bucket_limits) != len(bucket_counts), see the document.")
        summary = summaries.histogram_raw(
            tag, min, max, num, sum, sum_squares, bucket_limits, bucket_counts
        )
        self._get_file_writer().add_summary(summary, global_step, walltime)

    # ------------------------------------------------------------- images, text

    def add_image(
        self, tag: str, img_tensor, global_step=None, walltime=None, dataformats: str = "CHW"
    ) -> None:
        """``img_tensor``: float pixels in [0, 1] or uint8 ones, laid out as
        ``dataformats`` says ("CHW", "HWC", "HW"); 1 channel is grey, 3 RGB,
        4 RGBA."""
        summary = summaries.image(tag, img_tensor, dataformats)
        self._get_file_writer().add_summary(summary, global_step, walltime)

    def add_images(
        self, tag: str, img_tensor, global_step=None, walltime=None, dataformats: str = "NCHW"
    ) -> None:
        """A batch of images shown as one, a grid of up to 8 a row."""
        summary = summaries.image(tag, img_tensor, dataformats)
        self._get_file_writer().add_summary(summary, global_step, walltime)

    def add_figure(
        self, tag: str, figure, global_step=None, close: bool = True, walltime=None
    ) -> None:
        """A matplotlib figure (or a list of them, as a grid) as an image;
        ``close`` closes the figure once it is drawn."""
        image = images.figure_to_image(figure, close)
        dataformats = "NCHW" if isinstance(figure, list) else "CHW"
        self.add_image(tag, image, global_step, walltime, dataformats=dataformats)

    def add_text(self, tag: str, text_string: str, global_step=None, walltime=None) -> None:
        """Markdown, shown by the text dashboard."""
        summary = summaries.text(tag, text_string)
        self._get_file_writer().add_summary(summary, global_step, walltime)

    # ------------------------------------------------------------------ hparams

    def add_hparams(
        self,
        hparam_dict: dict,
        metric_dict: dict,
        hparam_domain_discrete: dict | None = None,
        run_name: str | None = None,
        global_step=None,
    ) -> None:
        """One trial for the hparams dashboard: its hyperparameters and the
        final values of its metrics, in a run of its own ``<log_dir>/<run_name>``
        (by default the time)."""
        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError("hparam_dict and metric_dict should be dictionary.")
        experiment, session_start, session_end = summaries.hparams(
            hparam_dict, metric_dict, hparam_domain_discrete
        )
        log_dir = os.path.join(self._get_file_writer().get_logdir(), run_name or str(time.time()))
        with SummaryWriter(log_dir=log_dir) as trial:
            for summary in (experiment, session_start, session_end):
                trial.file_writer.add_summary(summary, global_step)
            for tag, metric in metric_dict.items():
                trial.add_scalar(tag, metric, global_step)

    # -------------------------------------------------------------------- graph

    def add_graph(
        self, model, input_to_model=None, verbose: bool = False, use_strict_trace: bool = True
    ) -> None:
        """The graph of ``model(input_to_model)`` (a tuple: the arguments), as
        ``fusegrad.jit`` traces it: one node per primitive. ``verbose``
        prints the traced program too."""
        args = () if input_to_model is None else input_to_model
        self._get_file_writer().add_graph(graphs.graph_def(model, args, verbose))

    # --------------------------------------------------------------- embeddings

    def add_embedding(
        self,
        mat,
        metadata=None,
        label_img=None,
        global_step=None,
        tag: str = "default",
        metadata_header=None,
    ) -> None:
        """Points for the projector: ``mat`` (N x D) in
        ``<log_dir>/<step>/<tag>/tensors.tsv``, with a label per point
        (``metadata``; rows of columns named by ``metadata_header``) and an
        image per point (``label_img``, N x C x H x W) tiled in ``sprite.png``."""
        mat = summaries.make_np(mat)
        step = 0 if global_step is None else global_step
        subdir = f"{str(step).zfill(5)}/{_escape(tag)}"
        log_dir = self._get_file_writer().get_logdir()
        save_path = os.path.join(log_dir, subdir)
        if os.path.isdir(save_path):
            print("warning: Embedding dir exists, did you set global_step for add_embedding()?")
        elif os.path.exists(save_path):
            raise NotADirectoryError(f"Path: `{save_path}` exists, but is a file. Cannot proceed.")
        os.makedirs(save_path, exist_ok=True)
        if mat.ndim != 2:
            raise ValueError("mat should be 2D, where mat.size(0) is the number of data points")
        # the projector's EmbeddingInfo, its fields in the order of their numbers
        entries = [f'tensor_name: "{tag}:{str(step).zfill(5)}"']
        if metadata is not None:
            if len(metadata) != mat.shape[0]:
                raise ValueError("#labels should equal with #data points")
            _write_metadata(os.path.join(save_path, "metadata.tsv"), metadata, metadata_header)
            entries.append(f'metadata_path: "{subdir}/metadata.tsv"')
        if label_img is not None:
            label_img = summaries.make_np(label_img)
            if label_img.shape[0] != mat.shape[0]:
                raise ValueError("#images should equal with #data points")
            with open(os.path.join(save_path, "sprite.png"), "wb") as f:
                f.write(_sprite(label_img))
            height, width = label_img.shape[2], label_img.shape[3]
            entries.append(
                f'sprite {{\n    image_path: "{subdir}/sprite.png"\n'
                f"    single_image_dim: {width}\n    single_image_dim: {height}\n  }}"
            )
        entries.append(f'tensor_path: "{subdir}/tensors.tsv"')
        with open(os.path.join(save_path, "tensors.tsv"), "w") as f:
            f.writelines("\t".join(str(x) for x in row.tolist()) + "\n" for row in mat)
        self._projector_embeddings.append("embeddings {\n  " + "\n  ".join(entries) + "\n}\n")
        with open(os.path.join(log_dir, "projector_config.pbtxt"), "w") as f:
            f.write("".join(self._projector_embeddings))

    # ------------------------------------------------------------------- closing

    def flush(self) -> None:
        for writer in (self.all_writers or {}).values():
            writer.flush()

    def close(self) -> None:
        """Writes what is pending and closes the files; a later ``add_*``
        opens a new event file."""
        for writer in (self.all_writers or {}).values():
            writer.close()
        self.file_writer = self.all_writers = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        self.close()


def _escape(tag: str) -> str:
    """A tag as one directory name: %, / and \\ as %-escapes."""
    return tag.replace("%", "%25").replace("/", "%2f").replace("\\", "%5c")


def _write_metadata(path: str, metadata, header) -> None:
    if header:
        if len(header) != len(metadata[0]):
            raise ValueError("len of header must be equal to the number of columns in metadata")
        lines = ["\t".join(str(cell) for cell in row) for row in [header, *metadata]]
    else:
        lines = [str(label) for label in metadata]
    with open(path, "wb") as f:
        f.write(("\n".join(lines) + "\n").encode("utf-8"))


def _sprite(label_img: np.ndarray) -> bytes:
    """The images on a square grid, as the projector reads them: the
    smallest square number of cells that holds them all."""
    side = int(np.ceil(len(label_img) ** 0.5))
    grid = images.make_grid(label_img, ncols=side).transpose(1, 2, 0)
    square = np.zeros((grid.shape[1], grid.shape[1], 3))
    square[: grid.shape[0]] = grid
    return images.encode_png((square * 255).clip(0, 255).astype(np.uint8))
