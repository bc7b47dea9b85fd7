"""A usage census of PyTorch in public code, and how much of it fusegrad covers.

    python tools/census.py [--corpus DIR] [--repos FILE] [--top N] [--json OUT]

Reads every ``.py`` file and every notebook's code cells of each repository of
the corpus with ``ast`` (what fails to parse is skipped), resolves the import
aliases of ``torch`` (``import torch.nn as nn``, ``from torch.nn import
functional as F``, ``from torch.optim import Adam``, ...) and counts the
dotted ``torch.*`` names each file uses, plus the Tensor methods and attributes
it uses on values that are not modules (``x.view(...)``, ``p.grad``), counted
as ``Tensor.<name>``. Names are ranked by the number of repositories using
them. Each name is then looked up in fusegrad (``torch.a.b`` as
``fusegrad.a.b``, ``Tensor.x`` as an attribute of ``fusegrad.Tensor``), and
the usage-weighted coverage of the top 100, the top 1000 and all names is
printed (a name weighs the number of repositories using it), then the names
fusegrad lacks, most used first.

The corpus is a directory with one folder per repository, named
``owner+name``: a git directory (bare, or ``repo/`` or ``repo/.git`` inside
the folder, as the fetched snapshots are), read at the commit that
``--repos`` lists for it (else at HEAD), or a plain tree of files. ``--repos``
(default: tools/census_repos.txt, when the corpus is the default one) names the
repositories to count, one ``owner/name commit`` a line; ``--repos ''``
counts every folder of the corpus.

Needs only the standard library (and fusegrad, for the comparison).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import subprocess
import sys
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = Path(os.environ.get("CENSUS_CORPUS", Path.home() / ".cache" / "fusegrad-census"))
DEFAULT_REPOS = ROOT / "tools" / "census_repos.txt"
TENSOR_NAMES_FILE = ROOT / "tools" / "census_tensor_names.txt"
MAX_FILE_BYTES = 4 << 20
SOURCE_SUFFIXES = (".py", ".ipynb")


def _read_tensor_names(path: Path = TENSOR_NAMES_FILE) -> tuple[frozenset, frozenset]:
    """(attributes, methods) of torch.Tensor, from the data file."""
    sections: dict[str, set] = {"attributes": set(), "methods": set(), "not counted": set()}
    current = None
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("[") and line.endswith("]"):
            current = sections[line[1:-1]]
        elif line:
            current.update(line.split())
    skip = sections["not counted"]
    return frozenset(sections["attributes"] - skip), frozenset(sections["methods"] - skip)


TENSOR_ATTRIBUTES, TENSOR_METHODS = _read_tensor_names()

# Receivers that are taken for something other than a tensor: the method's
# own object, and the names configurations are usually kept under.
NON_TENSOR_RECEIVERS = frozenset(
    "self cls args opt opts cfg config conf hparams hps flags FLAGS options settings".split()
)
# Calls whose result is no tensor: str(x).split(...) is a string's method.
NON_TENSOR_CALLS = frozenset(
    "str dict list set tuple open super type int float bool range zip enumerate map filter "
    "sorted reversed repr format vars getattr".split()
)
# Modules whose functions return no tensor: np.zeros(3).reshape(...) is numpy's.
NON_TENSOR_MODULES = frozenset(
    "numpy pandas math os sys re json random time string collections itertools pathlib glob "
    "shutil pickle argparse logging datetime csv cv2 PIL scipy sklearn matplotlib h5py yaml "
    "jax tensorflow".split()
)
LITERALS = (
    ast.Constant,
    ast.JoinedStr,
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.Set,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)


# ---------------------------------------------------------------- one file


def _is_torch_module(module: str) -> bool:
    return module == "torch" or module.startswith("torch.")


@dataclass
class Aliases:
    """What each imported local name stands for in one file (or notebook)."""

    torch: dict[str, str] = field(default_factory=dict)  # local name -> torch.* path
    other: dict[str, str] = field(default_factory=dict)  # local name -> other module
    imports_torch: bool = False

    from_imports: set[str] = field(default_factory=set)  # torch names bound by "from"
    rebound: set[str] = field(default_factory=set)  # names assigned, parameters, defs

    def collect(self, tree: ast.AST) -> None:
        """Adds a tree's imports (a notebook's cells are collected one by one)."""
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.rebound.add(node.id)
            elif isinstance(node, ast.arg):
                self.rebound.add(node.arg)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.rebound.add(node.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if _is_torch_module(alias.name):
                        self.imports_torch = True
                        if alias.asname:
                            self.torch[alias.asname] = alias.name
                        else:
                            self.torch["torch"] = "torch"
                    else:
                        self.other[alias.asname or alias.name.split(".")[0]] = alias.name
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                from_torch = node.level == 0 and _is_torch_module(module)
                self.imports_torch |= from_torch
                for alias in node.names:
                    if alias.name == "*":
                        continue
                    local = alias.asname or alias.name
                    if from_torch:
                        self.torch[local] = f"{module}.{alias.name}"
                        self.from_imports.add(local)
                    else:
                        self.other[local] = module

    def settle(self) -> None:
        """Once every tree is collected: a name imported from torch that the file
        also binds itself (from torch.utils import data; for data in loader) is
        taken for the file's own, and a torch name for no other module's."""
        for name in self.from_imports & self.rebound:
            self.torch.pop(name, None)
        for name in self.torch:
            self.other.pop(name, None)


def _strip_dunder(parts: list[str]) -> list[str]:
    """nn.Module.__init__ counts as torch.nn.Module; torch.__version__ stays."""
    while len(parts) > 2 and parts[-1].startswith("__") and parts[-1].endswith("__"):
        parts = parts[:-1]
    return parts


class _Counter(ast.NodeVisitor):
    """Collects the torch.* names and Tensor.* names one tree uses."""

    def __init__(self, aliases: Aliases, names: set):
        self.aliases = aliases
        self.names = names
        self.call_funcs: set[int] = set()

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute) and not self._skip_call(node):
            self.call_funcs.add(id(node.func))
        self.generic_visit(node)

    @staticmethod
    def _skip_call(node: ast.Call) -> bool:
        """Calls that are a str's, dict's or list's methods however they are spelled."""
        attr = node.func.attr
        first = node.args[0] if node.args else None
        if attr == "split" and isinstance(first, ast.Constant) and isinstance(first.value, str):
            return True  # line.split(",")
        if attr == "values" and not node.args and not node.keywords:
            return True  # d.values()
        if attr == "sort" and any(k.arg in ("key", "reverse") for k in node.keywords):
            return True  # items.sort(key=...)
        return False

    def visit_Name(self, node: ast.Name) -> None:
        target = self.aliases.torch.get(node.id)
        if target is not None and target != "torch":
            self.names.add(target)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain = []
        base = node
        while isinstance(base, ast.Attribute):
            chain.append(base.attr)
            base = base.value
        if isinstance(base, ast.Name) and base.id in self.aliases.torch:
            parts = self.aliases.torch[base.id].split(".") + chain[::-1]
            self.names.add(".".join(_strip_dunder(parts)))
            return  # the chain's inner attributes are part of the name
        if isinstance(base, ast.Name) and base.id in self.aliases.other:
            return  # np.random.normal, os.path.split: another module's names
        if self.aliases.imports_torch and self._tensor_receiver(node.value, self.aliases):
            if node.attr in TENSOR_ATTRIBUTES or (
                node.attr in TENSOR_METHODS and id(node) in self.call_funcs
            ):
                self.names.add(f"Tensor.{node.attr}")
        self.visit(node.value)

    @staticmethod
    def _tensor_receiver(value: ast.AST, aliases: Aliases) -> bool:
        """Whether value may be a tensor: not a literal, a configuration, or what
        a builtin or a numpy-like module's function returns."""
        if isinstance(value, LITERALS):
            return False
        if isinstance(value, ast.Name):
            return value.id not in NON_TENSOR_RECEIVERS
        if isinstance(value, ast.Call):
            func = value.func
            if isinstance(func, ast.Name) and func.id in NON_TENSOR_CALLS:
                return False
            while isinstance(func, ast.Attribute):
                func = func.value
            if isinstance(func, ast.Name) and func.id in aliases.other:
                return aliases.other[func.id].split(".")[0] not in NON_TENSOR_MODULES
        return True


def notebook_cells(text: str) -> list[str]:
    """The code cells of a notebook's JSON (nbformat 3 or 4), magics blanked."""
    try:
        notebook = json.loads(text)
    except ValueError:
        return []
    if not isinstance(notebook, dict):
        return []
    cells = notebook.get("cells")
    if cells is None:  # nbformat 3
        cells = [c for sheet in notebook.get("worksheets", []) for c in sheet.get("cells", [])]
    sources = []
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", cell.get("input", ""))
        if isinstance(source, list):
            source = "".join(source)
        if not isinstance(source, str):
            continue
        lines = [
            "" if line.lstrip().startswith(("%", "!")) or line.rstrip().endswith("?") else line
            for line in source.splitlines()
        ]
        sources.append("\n".join(lines) + "\n")
    return sources


def names_in_sources(sources: list[str]) -> tuple[set, bool, int]:
    """(names used, whether torch is imported, pieces that parsed) for one file.

    A notebook's cells are its pieces, sharing one set of imports; a .py file
    is one piece.
    """
    trees = []
    for source in sources:
        try:
            trees.append(ast.parse(source))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    aliases = Aliases()
    for tree in trees:
        aliases.collect(tree)
    aliases.settle()
    names: set = set()
    if aliases.imports_torch:
        counter = _Counter(aliases, names)
        for tree in trees:
            try:
                counter.visit(tree)
            except RecursionError:
                continue
    return names, aliases.imports_torch, len(trees)


def names_in_file(path: str, data: bytes) -> tuple[set, bool, bool]:
    """(names used, imports torch, parsed) for one file's bytes."""
    text = data.decode("utf-8", errors="replace")
    sources = notebook_cells(text) if path.endswith(".ipynb") else [text]
    if not sources:
        return set(), False, False
    names, imports_torch, parsed = names_in_sources(sources)
    return names, imports_torch, parsed > 0


# ---------------------------------------------------------------- one repository


@dataclass
class RepoCount:
    name: str
    commit: str = ""
    files_seen: int = 0
    files_parsed: int = 0
    files_torch: int = 0
    names: Counter = field(default_factory=Counter)  # name -> files using it
    examples: dict = field(default_factory=dict)  # name -> the first files using it

    def add(self, path: str, data: bytes) -> None:
        self.files_seen += 1
        names, imports_torch, parsed = names_in_file(path, data)
        self.files_parsed += parsed
        self.files_torch += imports_torch
        self.names.update(names)
        for name in names:
            paths = self.examples.setdefault(name, [])
            if len(paths) < 3:
                paths.append(path)


def _git_dir(folder: Path) -> Path | None:
    for candidate in (folder / "repo" / ".git", folder / "repo", folder / ".git", folder):
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
    return None


def _git(git_dir: Path, *args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args],
        input=data,
        capture_output=True,
        check=True,
    ).stdout


def _git_files(git_dir: Path, commit: str):
    """(path, bytes) of the source files of one commit."""
    listing = _git(git_dir, "ls-tree", "-r", "-z", "--long", commit)
    wanted = []
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, path = entry.split(b"\t", 1)
        _mode, kind, sha, size = meta.split()
        path = path.decode("utf-8", errors="replace")
        # a snapshot lacks its largest files: their size reads "BAD"
        if kind == b"blob" and path.endswith(SOURCE_SUFFIXES) and size.isdigit():
            if int(size) <= MAX_FILE_BYTES:
                wanted.append((path, sha))
    if not wanted:
        return
    out = _git(git_dir, "cat-file", "--batch", data=b"".join(sha + b"\n" for _, sha in wanted))
    at = 0
    for path, _sha in wanted:
        header_end = out.index(b"\n", at)
        header = out[at:header_end].split()
        if len(header) < 3 or header[1] != b"blob":  # missing
            at = header_end + 1
            continue
        size = int(header[2])
        yield path, out[header_end + 1 : header_end + 1 + size]
        at = header_end + 1 + size + 1


def _plain_files(folder: Path):
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for filename in sorted(filenames):
            if filename.endswith(SOURCE_SUFFIXES):
                path = Path(dirpath) / filename
                if path.stat().st_size <= MAX_FILE_BYTES:
                    yield str(path.relative_to(folder)), path.read_bytes()


def count_repository(name: str, folder: str, commit: str | None = None) -> RepoCount:
    """Counts one repository: a git directory at commit (else HEAD), or a plain tree."""
    folder = Path(folder)
    result = RepoCount(name)
    git_dir = _git_dir(folder)
    if git_dir is None:
        files = _plain_files(folder)
    else:
        head = _git(git_dir, "rev-parse", "HEAD").decode().strip()
        if commit and commit != head:
            try:
                _git(git_dir, "cat-file", "-e", f"{commit}^{{commit}}")
            except subprocess.CalledProcessError:
                print(f"census: {name}: {commit} is not there, counting HEAD", file=sys.stderr)
                commit = None
        result.commit = commit or head
        files = _git_files(git_dir, result.commit)
    for path, data in files:
        result.add(path, data)
    return result


# ---------------------------------------------------------------- the corpus


def read_repo_list(path: Path) -> list[tuple[str, str | None]]:
    """(owner/name, commit or None) a line; '#' starts a comment."""
    repos = []
    for line in Path(path).read_text().splitlines():
        fields = line.split("#", 1)[0].split()
        if fields:
            repos.append((fields[0], fields[1] if len(fields) > 1 else None))
    return repos


def corpus_jobs(corpus: Path, repo_list: list | None) -> list[tuple[str, str, str | None]]:
    """(owner/name, folder, commit) of each repository to count."""
    if repo_list is None:
        folders = sorted(p for p in Path(corpus).iterdir() if p.is_dir() and "+" in p.name)
        return [(p.name.replace("+", "/", 1), str(p), None) for p in folders]
    jobs = []
    for name, commit in repo_list:
        folder = Path(corpus) / name.replace("/", "+", 1)
        if folder.is_dir():
            jobs.append((name, str(folder), commit))
        else:
            print(f"census: {name} is not in {corpus}, skipped", file=sys.stderr)
    return jobs


def _count_job(job):
    return count_repository(*job)


def _folder_bytes(folder: str) -> int:
    total = 0
    for dirpath, _dirnames, filenames in os.walk(folder):
        for filename in filenames:
            try:
                total += os.stat(os.path.join(dirpath, filename)).st_size
            except OSError:
                pass
    return total


def count_corpus(jobs: list, workers: int = 1) -> list[RepoCount]:
    """RepoCount of each job, in the order of the jobs."""
    if workers <= 1 or len(jobs) <= 1:
        return [_count_job(job) for job in jobs]
    # the largest repositories first, so that no worker is left with one at the end
    order = sorted(range(len(jobs)), key=lambda i: -_folder_bytes(jobs[i][1]))
    with ProcessPoolExecutor(workers) as pool:
        counted = list(pool.map(_count_job, [jobs[i] for i in order], chunksize=1))
    results: list = [None] * len(jobs)
    for i, count in zip(order, counted):
        results[i] = count
    return results


def rank(repos: list[RepoCount]) -> list[dict]:
    """Every name used, by the number of repositories using it, then of files."""
    in_repos: Counter = Counter()
    in_files: Counter = Counter()
    for repo in repos:
        in_repos.update(repo.names.keys())
        in_files.update(repo.names)
    order = sorted(in_repos, key=lambda n: (-in_repos[n], -in_files[n], n))
    return [{"name": n, "repos": in_repos[n], "files": in_files[n]} for n in order]


# ---------------------------------------------------------------- against fusegrad


def has_name(name: str, package: str = "fusegrad") -> bool:
    """Whether the package has torch's name: torch.a.b as package.a.b, Tensor.x
    as an attribute of package.Tensor."""
    try:
        module = importlib.import_module(package)
    except Exception:
        return False
    if name.startswith("Tensor."):
        tensor = getattr(module, "Tensor", None)
        return tensor is not None and hasattr(tensor, name.split(".", 1)[1])
    obj, path = module, package
    for part in name.split(".")[1:]:
        try:
            obj = getattr(obj, part)
            path = f"{path}.{part}"
            continue
        except Exception:
            pass
        if not isinstance(obj, type(module)):
            return False
        try:
            obj = importlib.import_module(f"{path}.{part}")
            path = f"{path}.{part}"
        except Exception:
            return False
    return True


def coverage(ranking: list[dict], top: int | None = None) -> float:
    """Share of the repository-weighted uses of the top names the package has."""
    chosen = ranking if top is None else ranking[:top]
    total = sum(entry["repos"] for entry in chosen)
    have = sum(entry["repos"] for entry in chosen if entry["present"])
    return have / total if total else 1.0


def compare(ranking: list[dict], package: str = "fusegrad") -> list[dict]:
    """Marks each entry present or not; a package that fails to import is an error."""
    importlib.import_module(package)
    for entry in ranking:
        entry["present"] = has_name(entry["name"], package)
    return ranking


def census(jobs: list, package: str = "fusegrad", workers: int = 1) -> dict:
    """Counts the corpus and compares it with the package: the whole result."""
    repos = count_corpus(jobs, workers)
    ranking = compare(rank(repos), package)
    where = {}
    for repo in repos:
        for name, paths in repo.examples.items():
            where.setdefault(name, []).extend(f"{repo.name}:{path}" for path in paths)
    return {
        "package": package,
        "repositories": len(repos),
        "repositories_using_torch": sum(1 for r in repos if r.files_torch),
        "files": sum(r.files_seen for r in repos),
        "files_parsed": sum(r.files_parsed for r in repos),
        "files_using_torch": sum(r.files_torch for r in repos),
        "names": len(ranking),
        "coverage": {
            "top100": coverage(ranking, 100),
            "top1000": coverage(ranking, 1000),
            "all": coverage(ranking),
        },
        "ranking": ranking,
        "where": where,
        "per_repository": [
            {
                "repo": r.name,
                "commit": r.commit,
                "files": r.files_seen,
                "files_parsed": r.files_parsed,
                "files_using_torch": r.files_torch,
                "names": len(r.names),
            }
            for r in repos
        ],
    }


def report(result: dict, top: int) -> str:
    ranking = result["ranking"]
    missing = [(i + 1, e) for i, e in enumerate(ranking) if not e["present"]]
    cover = result["coverage"]
    lines = [
        f"repositories: {result['repositories']} "
        f"({result['repositories_using_torch']} of them import torch)",
        f"files: {result['files']} .py and .ipynb, {result['files_parsed']} parsed, "
        f"{result['files_using_torch']} import torch",
        f"names: {result['names']} distinct torch.* and Tensor.* names",
        f"usage-weighted coverage by {result['package']} (weight: repositories using the name):",
    ]
    for label, key, count in (
        ("top 100", "top100", 100),
        ("top 1000", "top1000", 1000),
        ("all", "all", len(ranking)),
    ):
        chosen = ranking[:count]
        present = sum(1 for e in chosen if e["present"])
        lines.append(
            f"  {label:>8}: {100 * cover[key]:5.1f}%  ({present} of {len(chosen)} names present)"
        )
    shown = missing if top <= 0 else missing[:top]
    lines.append(
        f"missing names, most used first ({len(shown)} of {len(missing)} shown): "
        "rank, repositories, files, name"
    )
    for position, entry in shown:
        lines.append(f"  {position:5d} {entry['repos']:4d} {entry['files']:6d}  {entry['name']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="fetched repositories")
    parser.add_argument(
        "--repos",
        default=None,
        help="owner/name commit a line (default: tools/census_repos.txt for the default "
        "corpus, else every folder); '' for every folder",
    )
    parser.add_argument("--top", type=int, default=60, help="missing names shown (0: all)")
    parser.add_argument("--json", type=Path, help="write the whole result here")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument(
        "--where", action="append", default=[], metavar="NAME", help="show files using NAME"
    )
    args = parser.parse_args(argv)

    repos_file = args.repos
    if repos_file is None and args.corpus == DEFAULT_CORPUS and DEFAULT_REPOS.exists():
        repos_file = DEFAULT_REPOS
    repo_list = read_repo_list(repos_file) if repos_file else None
    jobs = corpus_jobs(args.corpus, repo_list)
    if not jobs:
        print(f"census: no repositories in {args.corpus}", file=sys.stderr)
        return 1
    sys.path.insert(0, str(ROOT))
    result = census(jobs, workers=args.jobs)
    print(report(result, args.top))
    for name in args.where:
        found = result["where"].get(name, [])
        print(f"{name}: used in {len(found)} files (up to 3 a repository)")
        for place in found:
            print(f"  {place}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
