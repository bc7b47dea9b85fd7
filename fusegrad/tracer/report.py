"""``FUSEGRAD_REPORT=<dir>``: one self-contained HTML page per process,
``<dir>/fusegrad-report-<pid>.html``, rewritten after every compilation and
at exit. It shows every jit function that compiled: its cache hits and
misses, and each compilation with why it happened, what its program's
guards check, the trace before the passes and the programs after them, the
kernels with their operation counts, the bytes saved for the backward and
the program's picture (``picture.py``), drawn as SVG when Graphviz's
``dot`` is installed, else as DOT text."""

from __future__ import annotations

import atexit
import html
import os
import threading
import time
from collections import Counter
from pathlib import Path

from ..ir.graph import format_graph, type_string
from . import picture

_lock = threading.Lock()
_functions: dict = {}  # id of a function's weak reference -> _Function, in compile order
_exit_registered = False


def enabled() -> bool:
    return bool(os.environ.get("FUSEGRAD_REPORT"))


class _Function:
    """One jit function's part of the page."""

    def __init__(self, function, name: str):
        self.function = function  # a weak reference: the page must not keep it alive
        self.name = name
        self.compiles: list = []

    def cache_line(self) -> str:
        function = self.function()
        if function is None:
            return "the function is gone"
        info = function.cache_info()
        return (
            f"{info.hits} cache hits, {info.misses} misses, {info.entries} programs kept, "
            f"{info.compile_seconds:.2f} s compiling"
        )


def compiled(function, name: str, program, number: int, reason: str, trace) -> None:
    """Adds compilation ``number`` of the jit function ``function`` (a weak
    reference; ``reason``: why it compiled; ``trace``: what it traced) and
    rewrites the page."""
    section = _compile_section(program, number, reason, trace)
    global _exit_registered
    with _lock:
        entry = _functions.get(id(function))
        if entry is None or entry.function is not function:
            entry = _functions[id(function)] = _Function(function, name)
        entry.compiles.append(section)
        if not _exit_registered:
            atexit.register(write_page)
            _exit_registered = True
    write_page()


def write_page() -> None:
    """Writes the page as it stands (with the cache counts of now)."""
    directory = os.environ.get("FUSEGRAD_REPORT")
    if not directory:
        return
    with _lock:
        body = [_function_section(entry) for entry in _functions.values()]
    path = Path(directory) / f"fusegrad-report-{os.getpid()}.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    # whole or not at all, for a browser reloading it while it is rewritten
    written = path.with_name(f"{path.name}.{threading.get_ident()}.partial")
    written.write_text(_PAGE.format(pid=os.getpid(), when=time.ctime(), body="\n".join(body)))
    os.replace(written, path)


def _function_section(entry: _Function) -> str:
    name = html.escape(entry.name)
    return (
        f'<section class="function" id="function-{name}">\n'
        f'<h2>{name}</h2>\n<p class="cache">{html.escape(entry.cache_line())}; '
        f"{len(entry.compiles)} compilations</p>\n" + "\n".join(entry.compiles) + "\n</section>"
    )


def _compile_section(program, number: int, reason: str, trace) -> str:
    program = getattr(program, "traced", program)  # a DynamicProgram: its trace's sizes
    guards = list(dict.fromkeys(program.guard_reasons()))  # one per place and kind
    parts = [
        f'<section class="compile" id="compile-{number}">',
        f"<h3>Compilation {number}</h3>",
        f'<p class="reason">Why: {html.escape(reason)}</p>',
        "<h4>Guards</h4>",
        _list(guards) if guards else "<p>none beyond the arguments' types and shapes</p>",
        _text("Trace, before the passes", _traced_ir(trace)),
        _text("Forward, after the passes", format_graph(program.forward, "forward")),
    ]
    if program.backward is not None:
        backward = format_graph(program.backward, "backward")
        parts.append(_text("Backward, after the passes", backward))
        saved = ", ".join(map(type_string, program.saved)) or "nothing"
        parts.append(
            f'<p class="saved">Saved for the backward beyond the inputs: '
            f"{program.saved_bytes} bytes ({html.escape(saved)})</p>"
        )
    parts += ["<h4>Kernels</h4>", _kernel_table(program), _picture(program), "</section>"]
    return "\n".join(parts)


def _traced_ir(trace) -> str:
    lines = format_graph(trace.graph([]), "traced").splitlines()
    return "\n".join(lines[:-1])  # its outputs are chosen after the trace


def _kernel_table(program) -> str:
    executors = {"forward": program.forward_executor, "backward": program.backward_executor}
    rows = []
    for name, executor in executors.items():
        for kernel in executor.kernels if executor is not None else ():
            operations = Counter(e.prim.name for e in kernel.eqns)
            counted = ", ".join(f"{prim} {count}" for prim, count in operations.items())
            rows.append(
                f"<tr><td>{name}</td><td>{html.escape(kernel.name)}</td><td>{len(kernel.eqns)}</td>"
                f"<td>{html.escape(counted)}</td><td>{list(kernel.kernel.shape)}</td></tr>"
            )
    if not rows:
        return "<p>none</p>"
    header = (
        "<tr><th>program</th><th>kernel</th><th>operations</th><th>by kind</th><th>over</th></tr>"
    )
    return f'<table class="kernels">{header}\n' + "\n".join(rows) + "</table>"


def _picture(program) -> str:
    dot_text = picture.program_dot(program)
    svg = picture.svg_of(dot_text)
    if svg is None:
        return _text("Picture (DOT: Graphviz's dot draws it)", dot_text, opened=True)
    svg = svg[svg.index("<svg") :]  # without the XML prologue, inside HTML
    return f'<h4>Picture</h4>\n<div class="picture">{svg}</div>'


def _list(items: list) -> str:
    return "<ul>" + "".join(f"<li>{html.escape(item)}</li>" for item in items) + "</ul>"


def _text(title: str, text: str, opened: bool = False) -> str:
    return (
        f"<details{' open' if opened else ''}><summary>{html.escape(title)}</summary>"
        f"<pre>{html.escape(text)}</pre></details>"
    )


_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>fusegrad compile report, process {pid}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; }}
pre {{ background: #f6f6f6; padding: 0.5em; overflow-x: auto; }}
section.function {{ border-top: 2px solid #888; margin-top: 2em; }}
section.compile {{ margin-left: 1em; }}
table.kernels td, table.kernels th {{ border: 1px solid #ccc; padding: 0.2em 0.5em; }}
div.picture {{ overflow: auto; max-height: 60em; border: 1px solid #ccc; }}
div.picture svg {{ max-width: 100%; height: auto; }}
</style></head>
<body>
<h1>fusegrad compile report</h1>
<p>Process {pid}, written {when}.</p>
{body}
</body></html>
"""
