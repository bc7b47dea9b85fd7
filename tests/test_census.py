"""The usage census (tools/census.py) on a tiny corpus made here: import
aliases resolved, Tensor methods told from other objects' methods, names
ranked by repositories rather than files, notebooks read cell by cell, and the
coverage figure against a small stand-in package. Needs neither the network
nor the fetched corpus."""

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def census():
    spec = importlib.util.spec_from_file_location("census", ROOT / "tools" / "census.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["census"] = module  # the worker processes find it by name
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("census", None)


ALICE_MODEL = """\
import torch as T
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import Adam
import numpy as np


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        return F.relu(self.fc(x)).view(-1)


x = T.zeros(3)
opt = Adam(Net().parameters())
y = np.ones(3).reshape(3)
words = "a,b".split(",")
x.grad = None
"""

ALICE_SCRIPT = """\
import torch
x = torch.zeros(2)
x.view(2)
"""

BOB_SHADOW = """\
from torch.utils import data
import torch
for data in [torch.ones(1)]:
    data.shape
"""

CAROL_NUMPY = """\
import numpy as np
x = np.zeros(3)
x.sum()
"""


def _notebook():
    def code(source):
        return {"cell_type": "code", "metadata": {}, "outputs": [], "source": source}

    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [
            code("%matplotlib inline\nimport torch\nfrom torch.utils.data import DataLoader\n"),
            code("loader = DataLoader([1])\nt = torch.tensor([1.0])\nt.unsqueeze(0).sum()\n"),
            code("def broken(:\n"),
            {"cell_type": "markdown", "metadata": {}, "source": "torch.markdown_only(x)"},
            code(["from torch import nn as tnn\n", "layer = tnn.Linear(1, 1)\n"]),
        ],
    }


@pytest.fixture
def corpus(tmp_path):
    root = tmp_path / "corpus"
    files = {
        "alice+models/model.py": ALICE_MODEL,
        "alice+models/scripts/one.py": ALICE_SCRIPT,
        "alice+models/scripts/two.py": ALICE_SCRIPT,
        "bob+notebooks/intro.ipynb": json.dumps(_notebook()),
        "bob+notebooks/old.py": 'print "python 2"\n',
        "bob+notebooks/shadow.py": BOB_SHADOW,
        "carol+numpy/array.py": CAROL_NUMPY,
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """A package with torch.nn.Linear, torch.zeros and Tensor.view and .sum only."""
    package = tmp_path / "pkgs" / "fakegrad"
    (package / "nn").mkdir(parents=True)
    (package / "__init__.py").write_text(
        "from . import nn\n\n\ndef zeros(*size):\n    return None\n\n\n"
        "class Tensor:\n    def view(self, *shape):\n        return self\n\n"
        "    def sum(self):\n        return self\n"
    )
    (package / "nn" / "__init__.py").write_text("class Linear:\n    pass\n")
    monkeypatch.syspath_prepend(str(package.parent))
    yield "fakegrad"
    for name in [m for m in sys.modules if m == "fakegrad" or m.startswith("fakegrad.")]:
        del sys.modules[name]


EXPECTED = {
    "alice/models": {
        "torch.nn.Module",
        "torch.nn.Linear",
        "torch.nn.functional.relu",
        "Tensor.view",
        "torch.zeros",
        "torch.optim.Adam",
        "Tensor.grad",
    },
    "bob/notebooks": {
        "torch.utils.data.DataLoader",
        "torch.tensor",
        "Tensor.unsqueeze",
        "Tensor.sum",
        "torch.nn.Linear",
        "torch.ones",
        "Tensor.shape",
    },
    "carol/numpy": set(),
}


def test_names_of_each_repository(census, corpus):
    repos = census.count_corpus(census.corpus_jobs(corpus, None))
    assert {r.name: set(r.names) for r in repos} == EXPECTED
    alice, bob, carol = repos
    assert alice.names["torch.zeros"] == 3  # files using it
    assert (bob.files_seen, bob.files_parsed, bob.files_torch) == (3, 2, 2)
    assert (carol.files_seen, carol.files_parsed, carol.files_torch) == (1, 1, 0)


def test_aliases_and_tensor_methods(census):
    names, imports_torch, parsed = census.names_in_sources(
        [
            "import torch.nn.functional as F\n"
            "from torch.optim.lr_scheduler import StepLR\n"
            "import torch.utils.data\n"
            "import numpy as np\n"
            "loader = torch.utils.data.DataLoader([])\n"
            "sched = StepLR(None, 1)\n"
            "F.relu(np.zeros(1).max())\n"
            "np.random.normal().sort()\n"
            "counts.values()\n"
            "lines.sort(key=len)\n"
            "args.device, self.float()\n"
            "torch.randn(3).cpu().numpy()\n"
            "x.data.normal_(0, 1)\n"
            "nn.Module.__init__(self)\n"
        ]
    )
    assert imports_torch and parsed == 1
    assert names == {
        "torch.nn.functional.relu",
        "torch.optim.lr_scheduler.StepLR",
        "torch.utils.data.DataLoader",
        "torch.randn",
        "Tensor.cpu",
        "Tensor.numpy",
        "Tensor.data",
        "Tensor.normal_",
    }


def test_ranking_is_by_repositories(census, corpus):
    ranking = census.rank(census.count_corpus(census.corpus_jobs(corpus, None)))
    assert ranking[0] == {"name": "torch.nn.Linear", "repos": 2, "files": 2}
    position = {entry["name"]: i for i, entry in enumerate(ranking)}
    # three files of one repository weigh less than one file in each of two
    assert position["torch.zeros"] > position["torch.nn.Linear"]
    # among names of one repository, more files come first
    assert position["torch.zeros"] < position["torch.nn.Module"]
    assert len(ranking) == 13


def test_coverage(census, corpus, stand_in):
    result = census.census(census.corpus_jobs(corpus, None), package=stand_in)
    present = {e["name"] for e in result["ranking"] if e["present"]}
    assert present == {"torch.nn.Linear", "torch.zeros", "Tensor.view", "Tensor.sum"}
    # weights: torch.nn.Linear 2 (two repositories), the 12 other names 1 each
    assert result["coverage"]["all"] == pytest.approx(5 / 14)
    assert result["coverage"]["top100"] == pytest.approx(5 / 14)
    assert census.coverage(result["ranking"], 1) == 1.0
    assert (result["repositories"], result["repositories_using_torch"]) == (3, 2)
    assert (result["files"], result["files_parsed"], result["files_using_torch"]) == (7, 6, 5)


def test_fusegrad_names(census):
    assert census.has_name("torch.zeros")
    assert census.has_name("torch.nn.functional.relu")
    assert census.has_name("Tensor.view")
    assert not census.has_name("torch.no_such_function")
    assert not census.has_name("torch.nn.NoSuchLayer.forward")
    assert not census.has_name("Tensor.no_such_method")


def test_command_line(census, corpus, tmp_path, capsys):
    out = tmp_path / "census.json"
    repos = tmp_path / "repos.txt"
    repos.write_text("# owner/name commit\nalice/models\nbob/notebooks\n")
    assert census.main(["--corpus", str(corpus), "--repos", str(repos), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "repositories: 2 (2 of them import torch)" in text
    assert "top 100: 100.0%" in text  # fusegrad has all of the 13 names
    result = json.loads(out.read_text())
    assert [r["repo"] for r in result["per_repository"]] == ["alice/models", "bob/notebooks"]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_snapshot_at_listed_commit(census, tmp_path):
    work = tmp_path / "dave+snap" / "repo"
    work.mkdir(parents=True)
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "HOME": str(tmp_path),
        "PATH": "/usr/bin:/bin:/usr/local/bin",
    }

    def git(*args):
        subprocess.run(["git", *args], cwd=work, env=env, check=True, capture_output=True)
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=work, env=env, capture_output=True, text=True
        ).stdout.strip()

    git("init", "-q")
    (work / "a.py").write_text("import torch\ntorch.zeros(1)\n")
    git("add", "a.py")
    first = git("commit", "-q", "-m", "one")
    (work / "a.py").write_text("import torch\ntorch.ones(1)\n")
    git("commit", "-q", "-am", "two")
    [(name, folder, commit)] = census.corpus_jobs(tmp_path, [("dave/snap", first)])
    counted = census.count_repository(name, folder, commit)
    assert counted.commit == first and set(counted.names) == {"torch.zeros"}
    assert set(census.count_repository(name, folder).names) == {"torch.ones"}
