"""``torch`` resolving to fusegrad, so that unmodified PyTorch code runs on it.

    import fusegrad.as_torch

    with fusegrad.as_torch.enabled():
        import torch.nn as nn           # fusegrad.nn
        import torchviz                 # its own ``import torch`` gives fusegrad

``install()`` puts a finder first in ``sys.meta_path`` that maps ``torch`` and
``torch.x.y`` to ``fusegrad`` and ``fusegrad.x.y``, and registers each module
object under the ``torch`` name as well: ``sys.modules["torch.nn"] is
sys.modules["fusegrad.nn"]``. ``python -m fusegrad script.py`` runs a script
with it installed.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.util
import multiprocessing.spawn
import sys
import types

# The submodule of torch that is PyTorch's C++ extension: what imports it needs PyTorch itself.
_EXTENSION = "_C"


class _AliasLoader(importlib.abc.Loader):
    """Loads a ``torch`` name as the fusegrad module it stands for."""

    def __init__(self, module: types.ModuleType):
        self.module = module
        self.module_spec = module.__spec__

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        # The import system gave the module the torch name's spec; it stays
        # fusegrad's, for the relative imports its functions run later.
        module.__spec__ = self.module_spec


class _TorchFinder(importlib.abc.MetaPathFinder):
    """Finds ``torch[.x.y]`` as ``fusegrad[.x.y]``."""

    def find_spec(self, fullname, path=None, target=None):
        top, _, rest = fullname.partition(".")
        # `from torch import _C` asks for fusegrad._C: the module's real name.
        if top in ("torch", "fusegrad") and rest.partition(".")[0] == _EXTENSION:
            raise ImportError(_needs_pytorch(fullname), name=fullname)
        if top != "torch":
            return None
        module = _fusegrad_module(fullname)
        if module is None:
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: fusegrad does not provide {fullname}",
                name=fullname,
            )
        return importlib.util.spec_from_loader(fullname, _AliasLoader(module))


def _fusegrad_module(torch_name: str) -> types.ModuleType | None:
    """The fusegrad module ``torch_name`` stands for, imported, or None if
    fusegrad has none."""
    parent_name, _, child = torch_name.rpartition(".")
    if not parent_name:
        return importlib.import_module("fusegrad")
    # The import system imported the parent first; its real name may differ
    # from the plain rename where fusegrad re-exports a module under another name.
    parent = sys.modules[parent_name]
    name = f"{parent.__name__}.{child}"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name != name:
            raise  # the module exists; something it imports does not
    attribute = getattr(parent, child, None)
    return attribute if isinstance(attribute, types.ModuleType) else None


def _needs_pytorch(extension_name: str) -> str:
    torch_name = "torch." + extension_name.partition(".")[2]
    return (
        f"{_importer()} needs PyTorch's C++ extension: it imports {torch_name}, "
        "which fusegrad does not provide; run it with PyTorch"
    )


def _importer() -> str:
    """The module whose import statement is running, from the stack: the first
    frame outside the import machinery and this module."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        machinery = name == "importlib" or name.startswith("importlib.")
        if not machinery and frame.f_globals is not globals():
            if name == "__main__" and "__file__" in frame.f_globals:
                return f"the script {frame.f_globals['__file__']}"
            return name
        frame = frame.f_back
    return "the program"


_FINDER = _TorchFinder()


def _is_fusegrad(module) -> bool:
    return getattr(module, "__name__", "").partition(".")[0] == "fusegrad"


def _torch_names() -> list[str]:
    return [name for name in sys.modules if name == "torch" or name.startswith("torch.")]


class _InstallInChild:
    """Unpickled in a child that "spawn" starts, before the child imports the
    parent's main module again (as ``__mp_main__``, where a script's
    ``import torch`` would find PyTorch): installs the mapping there too."""

    def __reduce__(self):
        return install, ()


def _telling_children(get_preparation_data):
    def preparation_data(name):
        data = get_preparation_data(name)
        if _FINDER in sys.meta_path:
            data["fusegrad_as_torch"] = _InstallInChild()  # a key the child does not read
        return data

    preparation_data.tells_children = True
    return preparation_data


def install(*, replace_imported_torch: bool = False) -> None:
    """From now on ``import torch[.x.y]`` gives ``fusegrad[.x.y]``.

    A PyTorch already imported stays what ``import torch`` returns, and
    ``install`` raises, unless ``replace_imported_torch``: then its modules
    are dropped from ``sys.modules`` (objects that hold them keep them), as
    ``python -m fusegrad`` does before the script starts.
    """
    imported = [name for name in _torch_names() if not _is_fusegrad(sys.modules[name])]
    if imported and not replace_imported_torch:
        raise RuntimeError(
            "PyTorch is imported already, so `import torch` would keep giving it: "
            "install fusegrad.as_torch before anything imports torch, or run the "
            "script with `python -m fusegrad`"
        )
    for name in imported:
        del sys.modules[name]
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    if not getattr(multiprocessing.spawn.get_preparation_data, "tells_children", False):
        multiprocessing.spawn.get_preparation_data = _telling_children(
            multiprocessing.spawn.get_preparation_data
        )


def uninstall() -> None:
    """``import torch`` finds what it found before ``install()``; modules that
    imported torch meanwhile keep their fusegrad."""
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for name in _torch_names():
        if _is_fusegrad(sys.modules[name]):
            del sys.modules[name]


@contextlib.contextmanager
def enabled():
    """``install()`` for the ``with`` block; already installed, it stays so."""
    if _FINDER in sys.meta_path:
        yield
        return
    install()
    try:
        yield
    finally:
        uninstall()
