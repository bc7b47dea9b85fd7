"""fusegrad.hub and fusegrad.utils.model_zoo: the cache directory, downloads
(from an HTTP server on 127.0.0.1) with their hash check, checkpoints of
PyTorch's format, and entrypoints of a local or a GitHub repository's
hubconf.py (GitHub's addresses turned to the local server's)."""

import hashlib
import http.server
import io
import json
import os
import sys
import textwrap
import threading
import zipfile
from pathlib import Path
from urllib.request import Request

import numpy as np
import pytest

import fusegrad as fg
from fusegrad import hub
from fusegrad.utils import model_zoo

GOLDEN_CHECKPOINT = (Path(__file__).parent / "golden" / "torch_state_dict.pt").read_bytes()


class Server:
    """Serves ``files`` (path with query -> bytes) on 127.0.0.1, counting requests."""

    def __init__(self):
        self.files: dict = {}
        self.requests: list = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                server.requests.append(self.path)
                body = server.files.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    running = Server()
    yield running
    running.close()


@pytest.fixture
def hub_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(hub, "_hub_dir", None)
    hub.set_dir(tmp_path / "hub")
    return tmp_path / "hub"


# ---------------------------------------------------------------- directories


def test_the_hub_directory_follows_torch_home_then_xdg(monkeypatch, tmp_path):
    monkeypatch.setattr(hub, "_hub_dir", None)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "home"))
    assert hub.get_dir() == str(tmp_path / "home" / "hub")
    monkeypatch.delenv("TORCH_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub.get_dir() == str(tmp_path / "xdg" / "torch" / "hub")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert hub.get_dir() == os.path.expanduser("~/.cache/torch/hub")
    hub.set_dir(tmp_path / "mine")
    assert hub.get_dir() == str(tmp_path / "mine")


# ------------------------------------------------------------------ downloads


def test_download_checks_the_hash_prefix(server, tmp_path):
    server.files["/file.bin"] = b"some bytes"
    digest = hashlib.sha256(b"some bytes").hexdigest()
    target = tmp_path / "file.bin"
    hub.download_url_to_file(f"{server.url}/file.bin", str(target), digest[:8], progress=False)
    assert target.read_bytes() == b"some bytes"
    wrong = tmp_path / "wrong.bin"
    expected = f'invalid hash value \\(expected "0000", got "{digest}"\\)'
    with pytest.raises(RuntimeError, match=expected):
        hub.download_url_to_file(f"{server.url}/file.bin", str(wrong), "0000", progress=False)
    assert sorted(os.listdir(tmp_path)) == ["file.bin"]  # no partial file left


def test_download_shows_progress_on_stderr(server, tmp_path, capsys):
    server.files["/file.bin"] = bytes(1000)
    hub.download_url_to_file(f"{server.url}/file.bin", str(tmp_path / "f"))
    assert "100" in capsys.readouterr().err


def test_a_missing_url_raises_and_leaves_nothing(server, tmp_path):
    with pytest.raises(Exception, match="404"):
        hub.download_url_to_file(f"{server.url}/nothing", str(tmp_path / "f"), progress=False)
    assert os.listdir(tmp_path) == []


def test_load_state_dict_from_url_caches_and_checks_the_hash(server, hub_dir):
    name = f"tiny-{hashlib.sha256(GOLDEN_CHECKPOINT).hexdigest()[:8]}.pt"
    server.files[f"/weights/{name}"] = GOLDEN_CHECKPOINT
    url = f"{server.url}/weights/{name}"
    state = hub.load_state_dict_from_url(url, check_hash=True, progress=False)
    assert (hub_dir / "checkpoints" / name).exists()
    np.testing.assert_array_equal(state["linear.bias"].numpy(), [-1.5, 2.0])
    assert model_zoo.load_url is hub.load_state_dict_from_url
    again = model_zoo.load_url(url, check_hash=True, progress=False)
    assert len(server.requests) == 1  # the cached file served the second load
    assert list(again) == list(state)


def test_load_state_dict_from_url_refuses_a_wrong_hash(server, hub_dir):
    server.files["/weights/tiny-00000000.pt"] = GOLDEN_CHECKPOINT
    with pytest.raises(RuntimeError, match="invalid hash value"):
        hub.load_state_dict_from_url(
            f"{server.url}/weights/tiny-00000000.pt", check_hash=True, progress=False
        )
    assert os.listdir(hub_dir / "checkpoints") == []


def test_a_zipped_checkpoint_is_extracted(server, tmp_path):
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("inside.pt", GOLDEN_CHECKPOINT)
    server.files["/zipped.zip"] = archive.getvalue()
    state = hub.load_state_dict_from_url(
        f"{server.url}/zipped.zip", model_dir=str(tmp_path), file_name="saved.zip", progress=False
    )
    assert (tmp_path / "saved.zip").exists() and (tmp_path / "inside.pt").exists()
    assert state["steps"].item() == 7


# ---------------------------------------------------------------- local repos

HUBCONF = '''
dependencies = ["numpy"]

import torch
from tinymodels import width


def tiny(n=2, bias=True):
    """A linear layer from n features to one."""
    return torch.nn.Linear(n * width(), 1, bias=bias)


def _private():
    return None
'''


def write_repo(directory: Path, hubconf: str = HUBCONF) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "hubconf.py").write_text(textwrap.dedent(hubconf))
    (directory / "tinymodels.py").write_text("def width():\n    return 1\n")
    return directory


def test_load_from_a_local_directory_calls_the_entrypoint(tmp_path):
    repo = write_repo(tmp_path / "repo")
    model = hub.load(str(repo), "tiny", 3, source="local", bias=False)
    assert isinstance(model, fg.nn.Linear) and model.weight.shape == (1, 3) and model.bias is None
    assert sys.modules.get("torch") is None or sys.modules["torch"] is fg  # torch was fusegrad
    assert str(repo) not in sys.path


def test_local_entrypoint_errors(tmp_path):
    repo = write_repo(tmp_path / "repo")
    with pytest.raises(RuntimeError, match="Cannot find callable nope in hubconf"):
        hub.load(str(repo), "nope", source="local")
    with pytest.raises(ValueError, match='Unknown source: "ftp"'):
        hub.load(str(repo), "tiny", source="ftp")
    needy = write_repo(tmp_path / "needy", 'dependencies = ["no_such_module_here"]\n')
    with pytest.raises(RuntimeError, match="Missing dependencies: no_such_module_here"):
        hub.load(str(needy), "tiny", source="local")


# --------------------------------------------------------------- GitHub repos


@pytest.fixture
def github(server, monkeypatch, hub_dir):
    """GitHub (its zipballs, pages and API) served by the local server."""
    real_urlopen = hub.urlopen

    def local_urlopen(url_or_request, *args, **kwargs):
        request = url_or_request if isinstance(url_or_request, Request) else Request(url_or_request)
        request.full_url = request.full_url.replace(
            "https://api.github.com/", f"{server.url}/api/"
        ).replace("https://github.com/", f"{server.url}/github/")
        return real_urlopen(request, *args, **kwargs)

    monkeypatch.setattr(hub, "urlopen", local_urlopen)
    repo = write_repo(hub_dir.parent / "source")
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("owner-repo-abc123/", "")
        for path in repo.iterdir():
            z.write(path, f"owner-repo-abc123/{path.name}")
    server.files["/github/owner/repo/zipball/main"] = archive.getvalue()
    server.files["/github/owner/repo/tree/main/"] = b"a page"
    branches = [{"name": "main", "commit": {"sha": "abc123"}}]
    server.files["/api/repos/owner/repo/branches?per_page=100&page=1"] = json.dumps(
        branches
    ).encode()
    for kind, page in [("branches", 2), ("tags", 1)]:
        server.files[f"/api/repos/owner/repo/{kind}?per_page=100&page={page}"] = b"[]"
    return server


def test_load_from_github_downloads_the_repository_once(github, hub_dir, capsys):
    model = hub.load("owner/repo", "tiny", trust_repo=True)
    assert isinstance(model, fg.nn.Linear) and model.weight.shape == (1, 2)
    assert (hub_dir / "owner_repo_main" / "hubconf.py").exists()
    assert (hub_dir / "trusted_list").read_text() == "owner_repo\n"
    assert sorted(os.listdir(hub_dir)) == ["owner_repo_main", "trusted_list"]  # zip removed
    downloads = [r for r in github.requests if "zipball" in r]
    # public callables, the imported one too, as PyTorch lists them
    assert hub.list("owner/repo:main", trust_repo="check") == ["tiny", "width"]
    assert hub.help("owner/repo", "tiny") == "A linear layer from n features to one."
    assert [r for r in github.requests if "zipball" in r] == downloads
    assert "Using cache found in" in capsys.readouterr().err
    hub.load("owner/repo", "tiny", force_reload=True, trust_repo=True)
    assert len([r for r in github.requests if "zipball" in r]) == 2


def test_a_ref_the_repository_lacks_is_refused(github):
    with pytest.raises(ValueError, match=r"Cannot find feature in https://github\.com/owner/repo"):
        hub.load("owner/repo:feature", "tiny", trust_repo=True)


def test_an_untrusted_repository_is_asked_about(github, monkeypatch):
    answers = iter(["n", "yes"])
    monkeypatch.setattr("builtins.input", lambda prompt: next(answers))
    with pytest.raises(Exception, match="Untrusted repository"):
        hub.load("owner/repo", "tiny")
    assert hub.load("owner/repo", "tiny", skip_validation=True).weight.shape == (1, 2)
