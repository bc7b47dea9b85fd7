"""Runs a PyTorch script on fusegrad, as ``python`` would run it on PyTorch:

    python -m fusegrad script.py [args ...]
    python -m fusegrad -m package.module [args ...]

``torch`` and its submodules resolve to fusegrad's (``fusegrad.as_torch``),
for the script and for the libraries it imports.
"""

import os
import runpy
import sys
import zipfile

from . import as_torch

USAGE = "usage: python -m fusegrad script.py [args ...] | -m module [args ...]"


def main(arguments: list[str]) -> None:
    if arguments[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return
    runs_module = arguments[:1] == ["-m"]
    program = arguments[1:2] if runs_module else arguments[:1]
    if not program or program[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        sys.exit(2)
    as_torch.install(replace_imported_torch=True)
    if runs_module:
        module = arguments[1]
        sys.argv = ["-m", *arguments[2:]]  # run_module puts the module's file first, as python -m
        _report_errors_as_python(runpy.run_module, module, run_name="__main__", alter_sys=True)
        return
    script = arguments[0]
    if not os.path.exists(script):
        print(
            f"{sys.executable}: can't open file {os.path.abspath(script)!r}: "
            "[Errno 2] No such file or directory",
            file=sys.stderr,
        )
        sys.exit(2)
    sys.argv = arguments
    _script_directory_first(script)
    _report_errors_as_python(runpy.run_path, script, run_name="__main__")


def _script_directory_first(script: str) -> None:
    """``sys.path`` as ``python script.py`` has it: ``-m fusegrad`` put the
    working directory first, python puts the script's."""
    if getattr(sys.flags, "safe_path", False):  # python -P puts neither there
        return
    if os.path.isdir(script) or zipfile.is_zipfile(script):
        del sys.path[0]  # run_path puts the directory or archive there itself
    else:
        sys.path[0] = os.path.dirname(os.path.realpath(script))


def _report_errors_as_python(run, *args, **kwargs) -> None:
    """Runs ``run(*args, **kwargs)``; an exception is printed as python prints
    one that ends a program, its traceback beginning at the program's code,
    and the exit status is 1."""
    try:
        run(*args, **kwargs)
    except Exception as error:
        traceback = error.__traceback__
        while traceback is not None and _is_runner(traceback.tb_frame):
            traceback = traceback.tb_next
        # python's hook prints the traceback the exception holds, not its argument
        sys.excepthook(type(error), error.with_traceback(traceback), traceback)
        sys.exit(1)


def _is_runner(frame) -> bool:
    return frame.f_globals is globals() or frame.f_globals.get("__name__") == "runpy"


if __name__ == "__main__":
    main(sys.argv[1:])
