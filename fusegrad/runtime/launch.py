"""Launching a fused kernel: the memory of its operands, the layout it runs
in, its split over the cores, and numpy for what is too small or empty to be
worth a native call.

A launch is prepared once per layout of the kernel's arguments (dtype,
shape, strides): the arguments are checked against what the kernel was
built for, dimensions contiguous for every operand are merged, the compiled
variant is picked, and the outermost loop is cut into chunks, one per core,
when there is enough work. Everything a launch writes is allocated here,
contiguous, so a prepared launch holds for every later call with the same
argument layouts, and a plan can place those operands elsewhere (in a
workspace) with the same layouts.

With ``FUSEGRAD_CHECK=1`` every kernel is compiled bounds-checked: each load
and store is checked against its operand's extent, and a violation raises
``KernelBoundsError`` naming the kernel, the operand and the index.
"""

from __future__ import annotations

import os
from math import prod

import numpy as np

from ..codegen.kernels import BLOCK, KernelCode
from . import threads
from .addresses import data_address
from .routines import run_equation

CHECKED = os.environ.get("FUSEGRAD_CHECK") == "1"

# From this many element-operations on (see ``work_per_element``), a launch is
# split across the cores: a split launch costs some 40-50 us more than one
# native call (the handoff itself 15, the rest the Python that prepares the
# chunks), so a split pays from about 0.3 ms of work on one core (measured: a
# tanh kernel of 131k elements, 1.8M operations, was slower on two cores, one
# of 262k faster; a multiply-add broke even at 524k elements, 1.5M operations).
PARALLEL_WORK = 1 << 21
# In programs with matrix products (see Executor): measured on W7 and W8,
# 8% and 3% faster than splitting from PARALLEL_WORK.
PARALLEL_WORK_BESIDE_BLAS = 1 << 24
# A launch costs about as much Python work as SMALL_EQNS numpy calls on small
# arrays: a kernel with no more equations, below SMALL_WORK element-operations,
# runs them in numpy.
SMALL_EQNS = 4
SMALL_WORK = 2048
IN_NUMPY = "numpy"  # a launch that runs the kernel's equations through numpy
# Innermost strides compiled in as constants (others are read at run time):
# broadcast, contiguous, and the small steps of strided views (a pooling's
# tiles read every other element), which LLVM then loads as whole vectors
# and shuffles, where a stride known only at run time left the loop scalar.
CONSTANT_STRIDES = (0, 1, 2, 3, 4)


class KernelBoundsError(RuntimeError):
    """A bounds-checked kernel reached outside one of its operands."""


def layout_of(a: np.ndarray) -> tuple:
    """(dtype, shape, strides): what a prepared launch or a plan depends on."""
    return (a.dtype, a.shape, a.strides)


def contiguous(dtype, shape: tuple) -> tuple:
    """The layout of a fresh C-contiguous array."""
    dtype = np.dtype(dtype)
    if 0 in shape:  # numpy's own choice of strides for an empty array
        return (dtype, tuple(shape), np.empty(shape, dtype).strides)
    strides, step = [], dtype.itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return (dtype, tuple(shape), tuple(reversed(strides)))


def extent(shape: tuple, strides: tuple) -> tuple:
    """(lowest, highest + 1) element offset an array with these element
    strides reaches from its data pointer; (0, 0) when it is empty."""
    if any(n == 0 for n in shape):
        return (0, 0)
    low = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    high = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
    return (low, high + 1)


def merge_dimensions(shape: tuple, views: list, split: int) -> tuple:
    """(merged shape, element strides per operand, stride classes, merged
    dimensions before ``split``). ``views`` are the operands' (shape, element
    strides) in kernel coordinates, which broadcast to ``shape``. Dimensions
    merge when contiguous for every operand, never across ``split`` (the
    boundary between a reduction's kept and reduced dimensions)."""
    ndim = len(shape)
    strides = []
    for view_shape, view_strides in views:
        lead = ndim - len(view_shape)
        strides.append(
            (0,) * lead
            + tuple(
                0 if n == 1 and t != 1 else s
                for n, t, s in zip(view_shape, shape[lead:], view_strides)
            )
        )
    merged_shape, merged, before_split = [], [[] for _ in views], 0
    for region_index, region in enumerate((range(split), range(split, ndim))):
        start = len(merged_shape)
        for d in region:
            if shape[d] == 1:
                continue
            if len(merged_shape) > start and all(
                m[-1] == s[d] * shape[d] for m, s in zip(merged, strides)
            ):
                merged_shape[-1] *= shape[d]
                for m, s in zip(merged, strides):
                    m[-1] = s[d]
                continue
            merged_shape.append(shape[d])
            for m, s in zip(merged, strides):
                m.append(s[d])
        if region_index == 0:
            before_split = len(merged_shape)
    if (split < ndim and len(merged_shape) == before_split) or not merged_shape:
        # an inner loop of one: all the dimensions to reduce (or all) were size 1
        merged_shape.append(1)
        for m in merged:
            m.append(0)
    classes = tuple(m[-1] if m[-1] in CONSTANT_STRIDES else "s" for m in merged)
    return tuple(merged_shape), merged, classes, before_split


class Launch:
    """How one layout of a kernel's operands runs natively: the compiled
    function, the arrays its shape, strides and (bounds-checked) extents are
    read from, the chunks of its outermost loop, and which operands each
    chunk needs its own copy of (``private``)."""

    def __init__(self, function, shape, strides, extents, chunks, private, precise):
        self.function = function
        self.precise = precise
        self.checked = extents is not None
        self.tables = [np.array(shape, np.int64), np.array(strides, np.int64).reshape(-1)]
        if extents is not None:
            self.tables.append(np.array(extents, np.int64).reshape(-1))
        self.head = tuple(t.ctypes.data for t in self.tables)
        self.chunks = chunks
        self.private = private

    @property
    def end(self) -> int:
        return self.chunks[-1][1]


class Launcher:
    """Runs one kernel on arrays: ``launcher(arguments)`` returns the
    results (``code.results`` order)."""

    def __init__(self, code: KernelCode, beside_blas: bool = False):
        self.code = code
        self.beside_blas = beside_blas  # in a program with matrix products
        self.args = code.args
        self.results = code.results
        self.checked = CHECKED
        self.launches: dict = {}  # argument layouts -> Launch or IN_NUMPY

    @property
    def name(self) -> str:
        return self.code.name

    def __repr__(self) -> str:
        return repr(self.code)

    def how_it_ran(self) -> str:
        """Native (in how many compiled variants, on how many cores) or in numpy."""
        ways = []
        native = [launch for launch in self.launches.values() if launch is not IN_NUMPY]
        if native:
            variants = len({id(launch.function) for launch in native})
            cores = max(len(launch.chunks) for launch in native)
            ways.append(
                f"native ({variants} compiled layout{'s' * (variants > 1)}"
                + (f", split over {cores} cores" if cores > 1 else "")
                + ")"
            )
        if len(native) < len(self.launches):
            ways.append("numpy (too little work for a native call)")
        return " and ".join(ways) or "not run"

    def prepared(self, layouts: tuple, precise: bool = False):
        key = (layouts, precise) if precise else layouts
        launch = self.launches.get(key)
        if launch is None:
            launch = self.launches[key] = self._prepare(layouts, precise)
        return launch

    def native(self, layouts: tuple) -> Launch | None:
        """The launch for these argument layouts when it is one native call
        (not numpy, not split across cores): what a plan's driver can run."""
        launch = self.prepared(layouts)
        return launch if launch is not IN_NUMPY and len(launch.chunks) == 1 else None

    def __call__(self, arrays: list) -> list:
        layouts = tuple([layout_of(a) for a in arrays])
        launch = self.prepared(layouts)
        if launch is IN_NUMPY:
            return self.in_numpy(arrays)
        results = self._launch(launch, arrays)
        if results is None:  # an argument beyond a fast lowering's range
            results = self._launch(self.prepared(layouts, precise=True), arrays)
        return results

    def _launch(self, launch: Launch, arrays: list) -> list | None:
        """The results, or None when a range flag rose (unless ``precise``)."""
        operands = arrays + self.fresh()
        if len(launch.chunks) == 1:
            self._run(launch, [operands])
        else:
            self._run_split(launch, operands)
        if not launch.precise:
            flags = [a for op, a in zip(self.code.operands, operands) if op.role == "flag"]
            if any(f.any() for f in flags):
                return None
        first = len(arrays)
        return operands[first : first + len(self.results)]

    def fresh(self) -> list:
        """New arrays for every operand a launch writes; column accumulators
        hold their starting value."""
        return [
            np.empty(op.shape, op.dtype.np)
            if op.start is None
            else np.full(op.shape, op.start, op.dtype.np)
            for op in self.code.operands[len(self.args) :]
        ]

    def _run(self, launch: Launch, chunk_operands: list) -> None:
        error = np.zeros(3, np.int64) if self.checked else None
        shape, strides, *checks = launch.head  # the extents, when checked
        if error is not None:
            checks.append(error.ctypes.data)
        calls = []
        for (begin, end), operands in zip(launch.chunks, chunk_operands):
            addresses = [data_address(a) for a in operands]
            calls.append((shape, strides, begin, end, *checks, *addresses))
        threads.run(launch.function, calls, self.beside_blas)
        if error is not None and error[0]:
            raise self.bounds_error(int(error[1]), int(error[2]), launch)

    def _run_split(self, launch: Launch, operands: list) -> None:
        """Every chunk on a core. What chunks would share (column and whole
        reductions, a row split into chunks, spill rows) is per chunk, and
        the reductions are combined afterwards."""
        fresh = [operands]
        for _ in launch.chunks[1:]:
            extra = self.fresh()
            first = len(self.args)
            fresh.append(
                [
                    extra[k - first] if p else a
                    for k, (a, p) in enumerate(zip(operands, launch.private))
                ]
            )
        self._run(launch, fresh)
        for k, op in enumerate(self.code.operands):
            if op.reduce is not None and launch.private[k]:
                for own in fresh[1:]:
                    _combine(op.reduce, operands[k], own[k])
        code = self.code
        if code.kernel.row_eqns and any(
            p for op, p in zip(code.operands, launch.private) if op.extent == "row"
        ):
            self._rows_from_totals(operands)

    def _rows_from_totals(self, operands: list) -> None:
        """The row equations of a kernel whose one row was split into
        chunks: each chunk computed them from its partial totals, so they
        are computed again, in numpy, from the combined ones."""
        code = self.code
        env = {
            id(op.value): a
            for op, a in zip(code.operands, operands)
            if op.role in ("input", "row input", "reduction")
        }
        _run_in_numpy(code.kernel.row_eqns, env)
        for op, a in zip(code.operands, operands):
            if op.role == "row output":
                a[...] = env[id(op.value)]

    def in_numpy(self, arrays: list) -> list:
        """The kernel's equations one by one in numpy."""
        env = {id(v): a for v, a in zip(self.args, arrays)}
        _run_in_numpy(self.code.ordered, env)
        return [env[id(v)] for v in self.results]

    def bounds_error(self, k: int, index: int, launch: Launch) -> KernelBoundsError:
        op = self.code.operands[k]
        low, high = launch.tables[2][2 * k : 2 * k + 2]
        return KernelBoundsError(
            f"fusegrad: kernel {self.name} reached element {index} of operand {k} "
            f"({op.role} {op.dtype.name}{list(op.shape)}), outside its extent [{low}, {high})"
        )

    def _prepare(self, layouts: tuple, precise: bool):
        """Checks the arguments and picks how this layout runs."""
        code = self.code
        shape = code.kernel.shape
        for op, (dtype, arg_shape, strides) in zip(code.operands, layouts):
            if dtype != op.dtype.np:
                raise TypeError(
                    f"{self.name}: operand of dtype {dtype} where {op.dtype.name} was compiled"
                )
            if arg_shape != op.shape:
                raise ValueError(
                    f"{self.name}: operand of shape {arg_shape} where {op.shape} was compiled"
                )
            if any(s % dtype.itemsize for s in strides):
                raise ValueError(f"{self.name}: operand strides {strides} are not whole elements")
        if 0 in shape:
            return IN_NUMPY  # nothing to loop over; numpy gives the empty reductions' values
        eqns = len(code.ordered)
        # not with approximations: a value the backward computes again must
        # have the bits the forward computed, whichever kernel computes it
        tiny = eqns <= SMALL_EQNS and prod(shape) * (eqns + 1) < SMALL_WORK
        if tiny and not code.approximates:
            return IN_NUMPY
        every = list(layouts) + [
            contiguous(op.dtype.np, op.shape) for op in code.operands[len(layouts) :]
        ]
        views, extents = [], []
        for op, (dtype, _, strides) in zip(code.operands, every):
            elements = tuple(s // dtype.itemsize for s in strides)
            views.append((op.view, (0,) * op.before + elements + (0,) * op.after))
            extents.append(extent(op.shape, elements))
        merged, strides, classes, first = merge_dimensions(shape, views, code.split)
        function = code.compile((len(merged), classes, first, self.checked, precise))
        # Chunks split the outermost loop; rows kept there are each one
        # chunk's, anything summed across it is per chunk and combined.
        private = [
            op.role == "spill"
            or op.extent in ("column", "whole")
            or (first == 0 and (op.extent == "row" or op.role == "row output"))
            for op in code.operands
        ]
        chunks = [(0, merged[0])]
        work = prod(shape) * code.work_per_element
        enough = PARALLEL_WORK_BESIDE_BLAS if self.beside_blas else PARALLEL_WORK
        if work >= enough and not (first == 0 and code.last_phase):  # a pass needs all
            count = min(threads.count(), merged[0])
            step = -(-merged[0] // count)
            if len(merged) == 1:  # whole cache lines and blocks per chunk
                step = -(-step // BLOCK) * BLOCK
            chunks = [(s, min(s + step, merged[0])) for s in range(0, merged[0], step)]
        extents = extents if self.checked else None
        return Launch(function, merged, strides, extents, chunks, private, precise)


def _combine(kind: str, total: np.ndarray, partial: np.ndarray) -> None:
    """Combines another chunk's reduction into ``total``."""
    {"sum": np.add, "max": np.maximum, "min": np.minimum}[kind](total, partial, out=total)


def _run_in_numpy(eqns: list, env: dict) -> None:
    """Each equation on the arrays in ``env`` (by id of value), adding its result."""
    for eqn in eqns:
        env[id(eqn.out)] = run_equation(
            eqn, [env[id(v)] if id(v) in env else v.value for v in eqn.inputs]
        )
