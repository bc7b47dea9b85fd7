"""``fusegrad.hub``: models and weights from a URL, a GitHub repository or a
local directory, as ``torch.hub``.

Downloads are cached under ``get_dir()``: ``$TORCH_HOME/hub`` (``TORCH_HOME``
defaults to ``$XDG_CACHE_HOME/torch``, that to ``~/.cache``); weights under
its ``checkpoints``, repositories as ``<owner>_<repo>_<ref>``. A repository
publishes entrypoints, callables of its ``hubconf.py``; while they are
imported and called, their ``import torch`` gives fusegrad (unless PyTorch
itself is imported already).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import uuid
import warnings
import zipfile
from pathlib import Path
from urllib.error import HTTPError, URLError
from urllib.parse import urlparse
from urllib.request import Request, urlopen

from . import as_torch
from .serialization import load as _load

__all__ = [
    "download_url_to_file",
    "get_dir",
    "help",
    "list",
    "load",
    "load_state_dict_from_url",
    "set_dir",
]

HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")  # the hash prefix in "name-<sha256 prefix>.ext"
ENV_GITHUB_TOKEN = "GITHUB_TOKEN"
ENV_TORCH_HOME = "TORCH_HOME"
ENV_XDG_CACHE_HOME = "XDG_CACHE_HOME"
DEFAULT_CACHE_DIR = "~/.cache"
VAR_DEPENDENCY = "dependencies"  # hubconf's list of modules its entrypoints need
MODULE_HUBCONF = "hubconf.py"
READ_DATA_CHUNK = 128 * 1024
# owners whose repositories load without asking (trust_repo="check")
_TRUSTED_REPO_OWNERS = ("facebookresearch", "facebookincubator", "pytorch", "fairinternal")
_hub_dir: str | None = None

try:
    from tqdm import tqdm
except ImportError:

    class tqdm:  # tqdm's name, for code that imports it from here
        """A progress line on stderr, for when tqdm is not installed."""

        def __init__(self, total=None, disable=False, unit=None, *args, **kwargs):
            self.total, self.disable, self.n = total, disable, 0

        def update(self, n):
            if self.disable:
                return
            self.n += n
            shown = (
                f"{self.n:.1f} bytes" if self.total is None else f"{100 * self.n / self.total:.1f}%"
            )
            sys.stderr.write(f"\r{shown}")
            sys.stderr.flush()

        def close(self):
            self.disable = True

        def __enter__(self):
            return self

        def __exit__(self, *exc_info):
            if not self.disable:
                sys.stderr.write("\n")


# ---------------------------------------------------------------- directories


def _get_torch_home() -> str:
    cache = os.getenv(ENV_XDG_CACHE_HOME, DEFAULT_CACHE_DIR)
    return os.path.expanduser(os.getenv(ENV_TORCH_HOME, os.path.join(cache, "torch")))


def get_dir() -> str:
    """The hub's cache directory: ``set_dir``'s, else ``$TORCH_HOME/hub``."""
    if _hub_dir is not None:
        return _hub_dir
    return os.path.join(_get_torch_home(), "hub")


def set_dir(d) -> None:
    global _hub_dir
    _hub_dir = os.path.expanduser(d)


# ------------------------------------------------------------------ downloads


def download_url_to_file(
    url: str, dst: str, hash_prefix: str | None = None, progress: bool = True
) -> None:
    """Downloads ``url`` to ``dst``, through a temporary file beside it that
    is moved there once complete (and, given ``hash_prefix``, once its
    SHA-256 is found to begin so)."""
    dst = os.path.expanduser(dst)
    partial = f"{dst}.{uuid.uuid4().hex}.partial"
    try:
        with (
            open(partial, "w+b") as f,
            urlopen(Request(url, headers={"User-Agent": "torch.hub"})) as u,
        ):
            length = u.info().get_all("Content-Length")
            size = int(length[0]) if length else None
            sha256 = hashlib.sha256() if hash_prefix is not None else None
            with tqdm(
                total=size, disable=not progress, unit="B", unit_scale=True, unit_divisor=1024
            ) as bar:
                while buffer := u.read(READ_DATA_CHUNK):
                    f.write(buffer)
                    if sha256 is not None:
                        sha256.update(buffer)
                    bar.update(len(buffer))
        if sha256 is not None:
            digest = sha256.hexdigest()
            if digest[: len(hash_prefix)] != hash_prefix:
                raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got "{digest}")')
        shutil.move(partial, dst)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def load_state_dict_from_url(
    url: str,
    model_dir: str | None = None,
    map_location=None,
    progress: bool = True,
    check_hash: bool = False,
    file_name: str | None = None,
    weights_only: bool = False,
):
    """Loads the checkpoint at ``url`` (fusegrad's or PyTorch's format),
    downloading it into ``model_dir`` (``<hub dir>/checkpoints``) unless a
    file of its name is there already. ``check_hash``: the file's name is
    ``name-<hash>.ext`` and its SHA-256 must begin with that hash. A zip
    holding one file is that file, extracted."""
    if model_dir is None:
        model_dir = os.path.join(get_dir(), "checkpoints")
    os.makedirs(model_dir, exist_ok=True)
    filename = file_name if file_name is not None else os.path.basename(urlparse(url).path)
    cached_file = os.path.join(model_dir, filename)
    if not os.path.exists(cached_file):
        sys.stdout.write(f'Downloading: "{url}" to {cached_file}\n')
        found = HASH_REGEX.search(filename) if check_hash else None
        hash_prefix = found.group(1) if found else None
        download_url_to_file(url, cached_file, hash_prefix, progress=progress)
    if _is_zip_of_one_file(cached_file):
        with zipfile.ZipFile(cached_file) as archive:
            member = archive.infolist()[0]
            _safe_extract_zip(archive, model_dir)
        cached_file = os.path.join(model_dir, member.filename)
    return _load(cached_file, map_location=map_location, weights_only=weights_only)


def _is_zip_of_one_file(filename: str) -> bool:
    """A checkpoint zipped for download (PyTorch's own format is a zip of
    several records)."""
    if not zipfile.is_zipfile(filename):
        return False
    with zipfile.ZipFile(filename) as archive:
        members = archive.infolist()
    return len(members) == 1 and not members[0].is_dir()


def _safe_extract_zip(archive: zipfile.ZipFile, directory) -> None:
    """Extracts ``archive`` into ``directory``, refusing a member whose path
    would leave it."""
    root = Path(directory).resolve()
    for member in archive.infolist():
        name = os.path.normpath(member.filename)
        if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
            raise ValueError(f"Archive entry has absolute path: {member.filename}")
        if ".." in re.split(r"[/\\]", name):
            raise ValueError(f"Archive entry contains directory traversal: {member.filename}")
        if not (root / name).resolve().is_relative_to(root):
            raise ValueError(f"Archive entry escapes target directory: {member.filename}")
        archive.extract(member, root)


# -------------------------------------------------------------- repositories


def list(
    github: str,
    force_reload: bool = False,
    skip_validation: bool = False,
    trust_repo="check",
    verbose: bool = True,
) -> list:
    """The entrypoints of ``github``'s hubconf.py (``owner/repo[:ref]``): its
    public callables."""
    repo_dir = _get_cache_or_reload(github, force_reload, trust_repo, verbose, skip_validation)
    with _torch_as_fusegrad(), _on_sys_path(repo_dir):
        hubconf = _import_hubconf(repo_dir)
    return [
        name
        for name in dir(hubconf)
        if callable(getattr(hubconf, name)) and not name.startswith("_")
    ]


def help(
    github: str,
    model: str,
    force_reload: bool = False,
    skip_validation: bool = False,
    trust_repo="check",
):
    """The docstring of ``github``'s entrypoint ``model``."""
    repo_dir = _get_cache_or_reload(github, force_reload, trust_repo, True, skip_validation)
    with _torch_as_fusegrad(), _on_sys_path(repo_dir):
        return _entrypoint(_import_hubconf(repo_dir), model).__doc__


def load(
    repo_or_dir: str,
    model: str,
    *args,
    source: str = "github",
    trust_repo="check",
    force_reload: bool = False,
    verbose: bool = True,
    skip_validation: bool = False,
    **kwargs,
):
    """Calls entrypoint ``model`` of a repository's hubconf.py with ``args``
    and ``kwargs`` and returns what it returns. ``source="github"``:
    ``repo_or_dir`` is ``owner/repo[:ref]``, downloaded into the hub's
    directory unless there already (``force_reload``: again); "local": a
    directory holding hubconf.py.

    ``trust_repo``: True loads the repository and adds it to the hub's
    trusted list; "check" asks (on standard input) unless its owner or the
    list trusts it; False always asks."""
    source = source.lower()
    if source not in ("github", "local"):
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    if source == "github":
        repo_or_dir = _get_cache_or_reload(
            repo_or_dir, force_reload, trust_repo, verbose, skip_validation
        )
    with _torch_as_fusegrad(), _on_sys_path(repo_or_dir):
        entry = _entrypoint(_import_hubconf(repo_or_dir), model)
        return entry(*args, **kwargs)


def _torch_as_fusegrad():
    """A hubconf's ``import torch`` gives fusegrad, as the caller's does,
    unless PyTorch itself is imported already."""
    imported = sys.modules.get("torch")
    if imported is not None and imported.__name__ != "fusegrad":
        return contextlib.nullcontext()
    return as_torch.enabled()


@contextlib.contextmanager
def _on_sys_path(directory: str):
    sys.path.insert(0, directory)
    try:
        yield
    finally:
        sys.path.remove(directory)


def _import_hubconf(repo_dir: str):
    """The repository's hubconf.py (its directory on ``sys.path``, for the
    repository's own modules)."""
    path = os.path.join(repo_dir, MODULE_HUBCONF)
    spec = importlib.util.spec_from_file_location("hubconf", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _entrypoint(hubconf, model: str):
    if not isinstance(model, str):
        raise ValueError("Invalid input: model should be a string of function name")
    missing = [
        name
        for name in getattr(hubconf, VAR_DEPENDENCY, None) or ()
        if importlib.util.find_spec(name) is None
    ]
    if missing:
        raise RuntimeError(f"Missing dependencies: {', '.join(missing)}")
    entry = getattr(hubconf, model, None) if model in dir(hubconf) else None
    if entry is None or not callable(entry):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return entry


# ---------------------------------------------------------- GitHub downloads


def _get_cache_or_reload(
    github: str, force_reload: bool, trust_repo, verbose: bool = True, skip_validation: bool = False
) -> str:
    """The directory of ``github`` (``owner/repo[:ref]``) in the hub's
    cache, downloaded there from GitHub's zipball unless it is there
    already."""
    hub_dir = get_dir()
    os.makedirs(hub_dir, exist_ok=True)
    owner, name, ref = _parse_repo_info(github)
    safe_ref = ref.replace("/", "_")
    owner_name_branch = f"{owner}_{name}_{safe_ref}"
    repo_dir = os.path.join(hub_dir, owner_name_branch)
    _check_repo_is_trusted(owner, name, owner_name_branch, trust_repo)
    if not force_reload and os.path.exists(repo_dir):
        if verbose:
            sys.stderr.write(f"Using cache found in {repo_dir}\n")
        return repo_dir
    if not skip_validation:
        _validate_not_a_forked_repo(owner, name, ref)
    cached_file = os.path.join(hub_dir, safe_ref + ".zip")
    _remove_if_exists(cached_file)
    url = _git_archive_link(owner, name, ref)
    sys.stdout.write(f'Downloading: "{url}" to {cached_file}\n')
    try:
        download_url_to_file(url, cached_file, progress=False)
    except HTTPError as error:
        if error.code != 300:
            raise
        # a tag and a branch of that name: GitHub asks which
        warnings.warn(
            f"The ref {ref} is ambiguous. Perhaps it is both a tag and a branch in the repo? "
            "Torchhub will now assume that it's a branch. You can disambiguate tags and "
            "branches by explicitly passing refs/heads/branch_name or refs/tags/tag_name as "
            "the ref. That might require using skip_validation=True.",
            stacklevel=2,
        )
        download_url_to_file(
            _git_archive_link(owner, name, f"refs/heads/{ref}"), cached_file, progress=False
        )
    with zipfile.ZipFile(cached_file) as archive:
        extracted = os.path.join(hub_dir, archive.infolist()[0].filename)  # <owner>-<repo>-<sha>/
        _remove_if_exists(extracted)
        _safe_extract_zip(archive, hub_dir)
    _remove_if_exists(cached_file)
    _remove_if_exists(repo_dir)
    shutil.move(extracted, repo_dir)
    return repo_dir


def _parse_repo_info(github: str):
    """``owner/repo[:ref]`` as (owner, repo, ref); without a ref, "main" if
    GitHub has that branch, else "master" (offline: whichever is cached)."""
    repo_info, _, ref = github.partition(":")
    owner, name = repo_info.split("/")
    if ref:
        return owner, name, ref
    try:
        with urlopen(f"https://github.com/{owner}/{name}/tree/main/"):
            return owner, name, "main"
    except HTTPError as error:
        if error.code == 404:
            return owner, name, "master"
        raise
    except URLError as error:
        for cached in ("main", "master"):
            if os.path.exists(os.path.join(get_dir(), f"{owner}_{name}_{cached}")):
                return owner, name, cached
        raise RuntimeError(
            "It looks like there is no internet connection and the repo could not be found in "
            f"the cache ({get_dir()})"
        ) from error


def _git_archive_link(owner: str, name: str, ref: str) -> str:
    return f"https://github.com/{owner}/{name}/zipball/{ref}"


def _validate_not_a_forked_repo(owner: str, name: str, ref: str) -> None:
    """``ref`` is a branch, tag or commit of the repository itself, not of a
    fork (whose commits GitHub also serves under the parent's name): its
    branches and tags, from GitHub's API, name it or begin its commit."""
    headers = {"Accept": "application/vnd.github.v3+json"}
    token = os.environ.get(ENV_GITHUB_TOKEN)
    if token is not None:
        headers["Authorization"] = f"token {token}"
    for kind in ("branches", "tags"):
        page = 1
        while True:
            url = f"https://api.github.com/repos/{owner}/{name}/{kind}?per_page=100&page={page}"
            try:
                response = json.loads(_read_url(Request(url, headers=headers)))
            except HTTPError:
                headers.pop("Authorization", None)  # a bad token: try without
                response = json.loads(_read_url(Request(url, headers=headers)))
            if not response:
                break
            if any(
                item["name"] == ref or item["commit"]["sha"].startswith(ref) for item in response
            ):
                return
            page += 1
    raise ValueError(
        f"Cannot find {ref} in https://github.com/{owner}/{name}. If it's a commit from a forked "
        "repo, please call hub.load() with forked repo directly."
    )


def _read_url(request) -> str:
    with urlopen(request) as response:
        return response.read().decode(response.headers.get_content_charset("utf-8"))


def _check_repo_is_trusted(owner: str, name: str, owner_name_branch: str, trust_repo) -> None:
    """Asks whether to trust a repository that its owner, the trusted list
    (``<hub dir>/trusted_list``) and the cache (a repository downloaded
    before the list existed) do not vouch for, or that ``trust_repo=False``
    asks about; a repository loaded joins the list."""
    hub_dir = get_dir()
    trusted_list = os.path.join(hub_dir, "trusted_list")
    Path(trusted_list).touch()
    with open(trusted_list) as f:
        trusted = {line.strip() for line in f}
    owner_name = f"{owner}_{name}"
    is_trusted = (
        owner_name in trusted
        or os.path.isdir(os.path.join(hub_dir, owner_name_branch))
        or owner in _TRUSTED_REPO_OWNERS
    )
    if trust_repo is False or (trust_repo == "check" and not is_trusted):
        response = input(
            f"The repository {owner_name} does not belong to the list of trusted repositories "
            "and as such cannot be downloaded. Do you trust this repository and wish to add it "
            "to the trusted list of repositories (y/N)?"
        )
        if response.lower() in ("y", "yes"):
            if is_trusted:
                print("The repository is already trusted.")
        elif response.lower() in ("n", "no", ""):
            raise Exception("Untrusted repository.")  # PyTorch's exception
        else:
            raise ValueError(f"Unrecognized response {response}.")
    if not is_trusted:
        with open(trusted_list, "a") as f:
            f.write(owner_name + "\n")


def _remove_if_exists(path: str) -> None:
    if os.path.isfile(path):
        os.remove(path)
    elif os.path.exists(path):
        shutil.rmtree(path)
