"""The README's pictures, made again: an MLP's backward graph as torchviz
draws it, the compiled training step as ``lower().graph()`` draws it, a
profiled training step's Chrome trace opened in a trace viewer, and the
compile report of a training loop, each as Chromium shows it.

    python tools/pictures.py [--out docs/images] [--viewer DIR]

Needs Graphviz's ``dot``, Chromium (``/usr/bin/chromium``), torchviz and
graphviz from PyPI, and a trace viewer: speedscope's release files
(``npm install speedscope``; ``--viewer`` names its ``dist/release``),
which read Chrome's trace format as Perfetto and chrome://tracing do.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse

import fusegrad as fg
from fusegrad import nn
from fusegrad.profiler import ProfilerActivity, profile, record_function

CHROMIUM = "/usr/bin/chromium"


def autograd_graph(out: pathlib.Path) -> None:
    with fg.as_torch.enabled():
        import torchviz
    fg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    loss = nn.functional.cross_entropy(model(fg.randn(5, 4)), fg.tensor([0, 1, 2, 0, 1]))
    dot = torchviz.make_dot(loss, params=dict(model.named_parameters()))
    dot.format = "svg"
    dot.render(out / "autograd_graph", cleanup=True)


def program_graph(out: pathlib.Path) -> None:
    fg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    step = fg.jit(lambda x, t: nn.functional.cross_entropy(model(x), t))
    step.lower(fg.randn(5, 4), fg.tensor([0, 1, 2, 0, 1])).graph(out / "compiled_program")
    (out / "compiled_program.dot").unlink()


def profiled_steps(trace: pathlib.Path) -> None:
    """Two training steps of an MLP compiled with ``jit``, after one that
    compiles it: the forward's kernels, the backward's inside its node, the
    optimizer's eager operations."""
    fg.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    compiled = fg.jit(model)
    optimizer = fg.optim.SGD(model.parameters(), lr=0.1)
    x, labels = fg.randn(256, 784), fg.randint(0, 10, (256,))

    def step():
        with record_function("forward"):
            loss = nn.functional.cross_entropy(compiled(x), labels)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            optimizer.step()
            optimizer.zero_grad()

    step()
    with profile(activities=[ProfilerActivity.CPU]) as recording:
        for _ in range(2):
            step()
    recording.export_chrome_trace(str(trace))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # each request: only the pictures matter
        pass


@contextlib.contextmanager
def served(directory: pathlib.Path):
    """An HTTP server of ``directory`` on a free local port, for as long as
    the block runs: the viewer fetches the trace rather than reading a file."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def screenshot(url: str, png: pathlib.Path, size=(1400, 800)) -> None:
    subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size={size[0]},{size[1]}",
            "--virtual-time-budget=8000",
            f"--screenshot={png}",
            url,
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )


def trace_picture(out: pathlib.Path, viewer: pathlib.Path, work: pathlib.Path) -> None:
    site = work / "site"
    shutil.copytree(viewer, site)
    profiled_steps(site / "trace.json")
    with served(site) as address:
        query = urllib.parse.quote(f"{address}/trace.json", safe="")
        screenshot(f"{address}/index.html#profileURL={query}", out / "profile_trace.png")


def report_picture(out: pathlib.Path, work: pathlib.Path) -> None:
    script = work / "train.py"
    script.write_text(REPORTED_TRAINING)
    environment = {**os.environ, "FUSEGRAD_REPORT": str(work / "report")}
    subprocess.run([sys.executable, str(script)], env=environment, check=True, timeout=600)
    (page,) = (work / "report").glob("fusegrad-report-*.html")
    page.rename(work / "report" / "report.html")
    # The third compile (the short last batch; the second: the optimizer's
    # state, made by the first step), scrolled to inside a frame: headless
    # Chromium's screenshot of a page scrolled to a fragment is blank.
    (work / "report" / "frame.html").write_text(
        '<body style="margin:0"><iframe src="report.html#compile-3" '
        'style="width:100vw;height:100vh;border:0"></iframe></body>'
    )
    with served(work / "report") as address:
        screenshot(f"{address}/frame.html", out / "compile_report.png", size=(1200, 700))


# A training loop whose learning rate halves each epoch (read as an input:
# no compile) and whose last batch is short (a compile, and the report says why).
REPORTED_TRAINING = """
import fusegrad as fg

fg.manual_seed(0)
model = fg.nn.Sequential(fg.nn.Linear(784, 128), fg.nn.ReLU(), fg.nn.Linear(128, 10))
opt = fg.optim.SGD(model.parameters(), lr=0.1)
schedule = fg.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

@fg.jit
def train_step(x, y):
    opt.zero_grad()
    loss = fg.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss

data, labels = fg.randn(1000, 784), fg.randint(0, 10, (1000,))
for epoch in range(2):
    for start in range(0, 1000, 256):
        train_step(data[start : start + 256], labels[start : start + 256])
    schedule.step()
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="docs/images")
    parser.add_argument("--viewer", default="node_modules/speedscope/dist/release")
    options = parser.parse_args()
    out = pathlib.Path(options.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    autograd_graph(out)
    program_graph(out)
    with tempfile.TemporaryDirectory() as work:
        trace_picture(out, pathlib.Path(options.viewer).resolve(), pathlib.Path(work))
        report_picture(out, pathlib.Path(work))
    for picture in sorted(out.iterdir()):
        print(picture)


if __name__ == "__main__":
    main()
