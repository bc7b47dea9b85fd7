"""FUSEGRAD_REPORT: the HTML page of a process's compilations."""

import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import fusegrad as fg

CHROMIUM = "/usr/bin/chromium"

# A training loop whose learning rate halves every epoch (a number the
# program reads, no recompile) and whose last batch is short (a recompile).
TRAINING = textwrap.dedent(
    """
    import fusegrad as fg

    fg.manual_seed(0)
    model = fg.nn.Sequential(fg.nn.Linear(4, 8), fg.nn.ReLU(), fg.nn.Linear(8, 3))
    for p in model.parameters():
        p.grad = fg.zeros_like(p)
    opt = fg.optim.SGD(model.parameters(), lr=0.1)

    @fg.jit
    def train_step(x, y):
        opt.zero_grad()
        loss = fg.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    data, labels = fg.randn(40, 4), fg.randint(0, 3, (40,))
    for epoch in range(2):
        for start in range(0, 40, 16):
            train_step(data[start : start + 16], labels[start : start + 16])
        for group in opt.param_groups:
            group["lr"] *= 0.5
    """
)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    directory = tmp_path_factory.mktemp("report")
    script = directory / "train.py"
    script.write_text(TRAINING)
    environment = {**os.environ, "FUSEGRAD_REPORT": str(directory / "pages")}
    subprocess.run([sys.executable, str(script)], env=environment, check=True, timeout=600)
    (path,) = (directory / "pages").glob("fusegrad-report-*.html")
    return path


def test_page_shows_each_compilation_and_why(page):
    text = page.read_text()
    assert text.count('<section class="function"') == 1 and "<h2>train_step</h2>" in text
    reasons = re.findall(r'<p class="reason">Why: (.*?)</p>', text)
    assert reasons[0] == "first call"
    assert reasons[1] == (
        "argument &#x27;x&#x27;: float32[16, 4] -&gt; float32[8, 4]; "
        "argument &#x27;y&#x27;: int64[16] -&gt; int64[8]"
    )
    assert len(reasons) == 2  # the learning rate is an input, not a reason to compile
    assert "4 cache hits, 2 misses" in text  # written again at exit
    for section in ("Guards", "Kernels"):
        assert text.count(f"<h4>{section}</h4>") == 2
    for title in ("Trace, before the passes", "Forward, after the passes"):
        assert text.count(title) == 2
    assert "<td>forward</td><td>fused_add_relu</td><td>2</td><td>add 1, relu 1</td>" in text
    picture = "<svg" if shutil.which("dot") else "digraph program"
    assert text.count(picture) == 2


def test_page_shows_the_backward_program(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_REPORT", str(tmp_path))
    w = fg.randn(3, 2, requires_grad=True)
    fg.jit(lambda x: (x @ w).tanh().sum())(fg.randn(4, 3))
    text = (tmp_path / f"fusegrad-report-{os.getpid()}.html").read_text()
    assert "Backward, after the passes" in text
    assert "Saved for the backward beyond the inputs: 32 bytes (f32[4,2])" in text


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Chromium is not installed")
def test_page_loads_in_a_browser(page):
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    dom = done.stdout
    assert dom.count('<section class="compile"') == 2
    assert "Why: first call" in dom and "<h2>train_step</h2>" in dom
