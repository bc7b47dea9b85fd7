"""A compiled program as a picture: Graphviz DOT text of its forward and
backward programs as they run, each fused kernel a box (a cluster) around
its equations, matrix products and the other routines apart from the
equations numpy computes, operands as edges; the inputs, the outputs and
the residuals the forward saves for the backward marked with their types.
``Lowered.graph()`` returns it, ``FUSEGRAD_DUMP`` writes it beside each
program's text, ``FUSEGRAD_REPORT`` embeds it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from ..ir.graph import Const, Var, type_string
from ..runtime.launch import Launcher
from ..runtime.routines import ROUTINES

KERNEL_COLOR = "#e8f0fe"
ROUTINE_COLOR = "#ffd59e"
NUMPY_COLOR = "#f8c8d0"
INPUT_COLOR = "#cfe8ff"
OUTPUT_COLOR = "#c8f0c8"
SAVED_COLOR = "#ffb366"
LABEL_CHARS = 70


def program_dot(program) -> str:
    """The DOT text of ``program`` (a ``Program``, or a ``DynamicProgram``:
    the program of the sizes it was traced with)."""
    program = getattr(program, "traced", program)
    residuals = len(program.forward.outputs) - program.num_outputs - program.num_extras
    lines = [
        "digraph program {",
        "  rankdir=TB;",
        '  node [shape=box, style="rounded,filled", fillcolor=white, fontname=monospace, '
        "fontsize=10];",
    ]
    forward = _Section("forward", program.forward_executor)
    lines += forward.lines(_forward_input_label(program), _forward_output_label(program))
    if program.backward is not None:
        backward = _Section("backward", program.backward_executor)
        lines += backward.lines(_backward_input_label(residuals), _gradient_label)
        first_saved = program.num_outputs + program.num_extras
        for k in range(residuals):
            # a residual leaves the forward and enters the backward
            lines.append(
                f"  {forward.output_id(first_saved + k)} -> {backward.input_id(k)} "
                '[style=dashed, color="#cc6600", constraint=false];'
            )
    lines.append("}")
    return "\n".join(lines) + "\n"


class _Section:
    """One program (the forward or the backward) as a cluster of the picture."""

    def __init__(self, name: str, executor):
        self.name = name
        self.executor = executor
        self.graph = executor.graph
        self.ids: dict = {}  # Var -> its node's id

    def input_id(self, k: int) -> str:
        return f"{self.name}_in{k}"

    def output_id(self, k: int) -> str:
        return f"{self.name}_out{k}"

    def lines(self, input_label, output_label) -> list:
        body = [f"  subgraph cluster_{self.name} {{", f"    label={_quoted(self.name)};"]
        for k, v in enumerate(self.graph.inputs):
            self.ids[v] = self.input_id(k)
            label, color = input_label(k, v)
            body.append(_node(self.input_id(k), label, color, "shape=ellipse"))
        edges = []
        for index, step in enumerate(self.executor.steps):
            if isinstance(step, Launcher):
                body += self._kernel(index, step.code, edges)
            else:
                body.append(self._equation(step, edges, _step_color(step)))
        for k, v in enumerate(self.graph.outputs):
            label, color = output_label(k, v)
            body.append(_node(self.output_id(k), label, color, "shape=ellipse"))
            edges.append((v, self.output_id(k)))
        body.append("  }")
        return body + [f"  {self.ids[v]} -> {target};" for v, target in edges if v in self.ids]

    def _kernel(self, index: int, code, edges: list) -> list:
        eqns = code.eqns
        title = f"kernel {code.name}\n{len(eqns)} operations over {list(code.kernel.shape)}"
        cluster = [
            f"    subgraph cluster_{self.name}_kernel{index} {{",
            f"      label={_quoted(title)}; style=filled; fillcolor={_quoted(KERNEL_COLOR)};",
        ]
        cluster += ["  " + self._equation(eqn, edges, "white") for eqn in eqns]
        return cluster + ["    }"]

    def _equation(self, eqn, edges: list, color: str) -> str:
        node_id = self.ids[eqn.out] = f"{self.name}_v{len(self.ids)}"
        operands = " ".join(_operand(v, self.ids) for v in eqn.inputs)
        params = ", ".join(f"{k}={v!r}" for k, v in eqn.params.items())
        call = f"{eqn.prim.name}[{params}]" if params else eqn.prim.name
        text = f"{_operand(eqn.out, self.ids)} = {call} {operands}"
        edges += [(v, node_id) for v in eqn.inputs if isinstance(v, Var)]
        return _node(node_id, f"{_shortened(text)}\n{type_string(eqn.out)}", color)


def _step_color(eqn) -> str:
    return ROUTINE_COLOR if eqn.prim in ROUTINES else NUMPY_COLOR


def _operand(v, ids: dict) -> str:
    if isinstance(v, Const):
        return repr(v.value.item()) if v.value.ndim == 0 else f"const {type_string(v)}"
    return "%" + ids.get(v, "?").rsplit("_", 1)[-1]


def _forward_input_label(program):
    def label(k: int, v) -> tuple:
        kind = f"argument {k}" if k < program.num_args else f"captured {k - program.num_args}"
        return f"{kind}\n{type_string(v)}", INPUT_COLOR

    return label


def _forward_output_label(program):
    inputs = set(program.forward.inputs)

    def label(k: int, v) -> tuple:
        if k < program.num_outputs:
            return f"output {k}\n{type_string(v)}", OUTPUT_COLOR
        if k < program.num_outputs + program.num_extras:
            # a guard's value, a new value written back, a base of outputs
            return f"extra {k - program.num_outputs}\n{type_string(v)}", "white"
        saved = k - program.num_outputs - program.num_extras
        if v in inputs:
            return f"saved {saved}: an input\n{type_string(v)}", SAVED_COLOR
        size = v.dtype.np.itemsize
        for n in v.shape:
            size *= n
        return f"saved {saved}\n{type_string(v)}, {size} bytes", SAVED_COLOR

    return label


def _backward_input_label(residuals: int):
    def label(k: int, v) -> tuple:
        if k < residuals:
            return f"saved {k}\n{type_string(v)}", SAVED_COLOR
        return f"cotangent {k - residuals}\n{type_string(v)}", INPUT_COLOR

    return label


def _gradient_label(k: int, v) -> tuple:
    return f"gradient {k}\n{type_string(v)}", OUTPUT_COLOR


def _node(node_id: str, label: str, color: str, extra: str = "") -> str:
    attributes = f"label={_quoted(label)}, fillcolor={_quoted(color)}"
    return f"    {node_id} [{attributes}{', ' + extra if extra else ''}];"


def _shortened(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 3] + "..."


def _quoted(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def svg_of(dot_text: str) -> str | None:
    """The picture drawn by Graphviz's ``dot`` program; None without it."""
    program = shutil.which("dot")
    if program is None:
        return None
    done = subprocess.run(
        [program, "-Tsvg"], input=dot_text, capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout


def write(dot_text: str, path) -> None:
    """Writes ``<path>.dot`` and, when Graphviz's ``dot`` is installed,
    ``<path>.svg`` (a ``.dot`` or ``.svg`` ending of ``path`` is dropped)."""
    path = str(path)
    if path.endswith((".dot", ".svg")):
        path = path[:-4]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path + ".dot").write_text(dot_text)
    svg = svg_of(dot_text)
    if svg is not None:
        Path(path + ".svg").write_text(svg)
