"""The package's modules import each other without a circle, and no
import runs up a floor.

Every ``import`` statement of every module under ``fusegrad/`` is read from
its source (those inside functions too: a lazy import is still an edge a
reader has to follow), resolved to the module file it names, and the graph
searched for cycles and for edges from a lower floor to a higher one. A
failure names the offending edges.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import fusegrad

PACKAGE = Path(fusegrad.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _resolved(name: str) -> str | None:
    """The module of ours ``name`` is, or whose attribute it is."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str) -> set:
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            target = _resolved(name)
            if target is not None and target != module:
                found.add(target)
    return found


def _circles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def test_no_module_imports_itself_through_others():
    graph = {module: _imports(module) for module in MODULES}
    circles = _circles(graph)
    described = [
        "; ".join(f"{a} -> {b}" for a in circle for b in sorted(graph[a]) if b in circle)
        for circle in circles
    ]
    assert not circles, "import circles:\n" + "\n".join(described)


# The floors, bottom up: a module imports from its own floor and those below.
# ir/ knows nothing of LLVM or tensors, codegen/ nothing of how memory is
# laid out at run time, runtime/ nothing of tensors, the eager library
# nothing of tracing; the public packages (nn, optim, autograd, ...) stand on
# all of them.
FLOORS = {
    "fusegrad.version": 0,
    "fusegrad.timing": 0,
    "fusegrad.ir": 1,
    "fusegrad.codegen": 2,
    "fusegrad.runtime": 3,
    "fusegrad.eager": 4,
    "fusegrad.tracer": 5,
    "fusegrad": 7,  # the package's __init__: public names, re-exported
}
PUBLIC_FLOOR = 6


def _floor(module: str) -> int:
    if module == "fusegrad":
        return FLOORS["fusegrad"]
    name = module
    while name != "fusegrad":
        if name in FLOORS:
            return FLOORS[name]
        name = name.rpartition(".")[0]
    return PUBLIC_FLOOR


def test_no_import_runs_up_a_floor():
    upward = [
        f"{module} (floor {_floor(module)}) -> {target} (floor {_floor(target)})"
        for module in sorted(MODULES)
        for target in sorted(_imports(module))
        if _floor(target) > _floor(module)
    ]
    assert not upward, "imports running up a floor:\n" + "\n".join(upward)


def test_every_floor_is_a_package_of_ours():
    assert all(name in MODULES for name in FLOORS)


def test_the_reader_finds_a_known_edge():
    """The test above reads imports at all: tensor.py's of the IR is one."""
    assert "fusegrad.ir.primitives" in _imports("fusegrad.eager.tensor")


def test_a_circle_is_found_and_named():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_an_op_registered_twice_raises():
    from fusegrad.eager import ops

    with pytest.raises(RuntimeError, match="'exp' is registered twice"):
        ops.public(lambda input: input, name="exp")
