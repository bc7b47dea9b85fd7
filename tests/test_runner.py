"""``python -m fusegrad script.py args...`` runs an unmodified PyTorch script
as ``python script.py args...`` would, with ``torch`` resolving to fusegrad.

Each script runs in a process of its own, from a temporary directory, as a
user runs one.
"""

import os
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

import fusegrad
from fusegrad import as_torch

ROOT = Path(__file__).parent.parent


def _write(directory: Path, name: str, source: str) -> None:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))


def _run(directory: Path, *arguments: str) -> subprocess.CompletedProcess:
    """``python -m fusegrad *arguments`` in ``directory``, with this checkout's fusegrad."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "fusegrad", *arguments],
        cwd=directory,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _printed(directory: Path, *arguments: str) -> list:
    result = _run(directory, *arguments)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_the_script_runs_as_main_with_its_arguments(tmp_path):
    _write(
        tmp_path,
        "script.py",
        """
        import os, sys

        if __name__ == "__main__":
            print(sys.argv)
            print(os.path.abspath(__file__))
            print(sys.path[0])
        """,
    )
    assert _printed(tmp_path, "script.py", "a", "b") == [
        "['script.py', 'a', 'b']",
        str(tmp_path / "script.py"),
        os.path.realpath(tmp_path),
    ]


def test_torch_and_its_submodules_are_fusegrads(tmp_path):
    _write(
        tmp_path,
        "script.py",
        """
        import sys
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        import torch.optim.lr_scheduler
        from torch import optim
        from torch.utils.data import DataLoader
        import torch.distributions, torch.linalg
        import fusegrad

        print(torch is fusegrad, nn.Module is fusegrad.nn.Module)
        print(sys.modules["torch.nn"] is sys.modules["fusegrad.nn"])
        print(F is fusegrad.nn.functional, DataLoader is fusegrad.utils.data.DataLoader)
        print(optim.lr_scheduler.StepLR is fusegrad.optim.lr_scheduler.StepLR)
        print(torch.distributions is fusegrad.distributions, torch.linalg is fusegrad.linalg)
        print(fusegrad.nn.__spec__.name)
        print(F.relu(torch.tensor([-1.0, 2.0])))
        """,
    )
    assert _printed(tmp_path, "script.py") == [
        "True True",
        "True",
        "True True",
        "True",
        "True True",
        "fusegrad.nn",
        "tensor([0., 2.])",
    ]


def test_a_module_beside_the_script_imports_torch_as_fusegrad(tmp_path):
    _write(tmp_path, "helpers.py", "import torch\n\ndef twice(x):\n    return torch.mul(x, 2)\n")
    _write(
        tmp_path,
        "script.py",
        """
        import fusegrad
        import helpers

        print(helpers.torch is fusegrad, helpers.twice(fusegrad.ones(2)))
        """,
    )
    assert _printed(tmp_path, "script.py") == ["True tensor([2., 2.])"]


def test_a_pytorch_on_the_path_does_not_shadow_fusegrad(tmp_path):
    _write(tmp_path, "torch/__init__.py", "raise RuntimeError('PyTorch itself was imported')\n")
    _write(tmp_path, "script.py", "import torch, fusegrad\nprint(torch is fusegrad)\n")
    assert _printed(tmp_path, "script.py") == ["True"]


def test_an_exception_prints_the_scripts_traceback_and_exits_with_1(tmp_path):
    _write(tmp_path, "script.py", "def fail():\n    raise ValueError('boom')\n\nfail()\n")
    result = _run(tmp_path, "script.py")
    assert result.returncode == 1
    assert result.stderr == (
        "Traceback (most recent call last):\n"
        '  File "script.py", line 4, in <module>\n'
        "    fail()\n"
        '  File "script.py", line 2, in fail\n'
        "    raise ValueError('boom')\n"
        "ValueError: boom\n"
    )


def test_sys_exit_gives_the_exit_status(tmp_path):
    _write(tmp_path, "script.py", "import sys\nsys.exit(3)\n")
    assert _run(tmp_path, "script.py").returncode == 3


def test_a_submodule_fusegrad_lacks_is_named(tmp_path):
    _write(tmp_path, "script.py", "import torch.export\n")
    result = _run(tmp_path, "script.py")
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        "ModuleNotFoundError: No module named 'torch.export': fusegrad does not provide "
        "torch.export"
    )


def test_a_library_importing_torch_C_is_named_as_needing_pytorch(tmp_path):
    _write(tmp_path, "cextlib/__init__.py", "from . import kernels\n")
    _write(tmp_path, "cextlib/kernels.py", "import torch._C._nn\n")
    _write(tmp_path, "fromlib.py", "from torch import _C\n")
    _write(
        tmp_path,
        "script.py",
        """
        for library in ("cextlib", "fromlib"):
            try:
                __import__(library)
            except ImportError as error:
                print(error)
        """,
    )
    needs = (
        " needs PyTorch's C++ extension: it imports torch._C, "
        "which fusegrad does not provide; run it with PyTorch"
    )
    assert _printed(tmp_path, "script.py") == ["cextlib.kernels" + needs, "fromlib" + needs]


def test_dash_m_runs_a_module_as_main(tmp_path):
    _write(tmp_path, "package/__init__.py", "")
    _write(
        tmp_path,
        "package/train.py",
        """
        import sys
        import torch.nn, fusegrad

        if __name__ == "__main__":
            print(sys.argv[1:], torch.nn.Module is fusegrad.nn.Module)
        """,
    )
    assert _printed(tmp_path, "-m", "package.train", "x") == ["['x'] True"]


@pytest.mark.parametrize("arguments", [(), ("-m",), ("--unknown", "script.py")])
def test_without_a_program_it_prints_the_usage_and_exits_with_2(tmp_path, arguments):
    result = _run(tmp_path, *arguments)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: python -m fusegrad script.py")


def test_the_autograd_tutorial_prints_the_same_with_import_torch(tmp_path):
    """The example, written with ``import fusegrad as torch``, and the same
    file with PyTorch's ``import torch`` run through the runner."""
    example = ROOT / "examples" / "autograd_tutorial.py"
    source = example.read_text()
    fusegrad_import = "\nimport fusegrad as torch\n"
    assert fusegrad_import in source
    (tmp_path / "tutorial.py").write_text(source.replace(fusegrad_import, "\nimport torch\n"))
    direct = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, check=True
    ).stdout
    through_runner = "\n".join(_printed(tmp_path, "tutorial.py")) + "\n"

    def without_addresses(printed):
        return re.sub(r"0x[0-9a-f]+", "0x...", printed)

    assert without_addresses(through_runner) == without_addresses(direct)


def test_enabled_makes_torch_fusegrad_for_the_block_only():
    with as_torch.enabled():
        import torch.nn.functional

        assert sys.modules["torch"] is fusegrad
        assert torch.nn.functional is fusegrad.nn.functional
    assert not [name for name in sys.modules if name.partition(".")[0] == "torch"]
    assert fusegrad.nn.__spec__.name == "fusegrad.nn"


def test_an_imported_pytorch_is_replaced_only_when_asked(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    with pytest.raises(RuntimeError, match="PyTorch is imported already"):
        as_torch.install()
    try:
        as_torch.install(replace_imported_torch=True)
        import torch

        assert torch is fusegrad
    finally:
        as_torch.uninstall()
