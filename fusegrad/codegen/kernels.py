"""Fused elementwise kernels: LLVM IR for a loop nest over the iteration shape.

Every operand is addressed through element strides, so broadcast (stride 0),
transposed and sliced inputs are read in place. Before a launch the operands
are checked (dtype, broadcastable shape, strides in whole elements) and
adjacent dimensions that are contiguous for every operand are merged. A
kernel is compiled per layout: the number of merged dimensions and, for each
operand, whether its innermost stride is 0, 1 or something else; the
innermost loop then has constant strides and vectorizes.
"""

from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import ir

from ..ir import dtypes
from ..ir import primitives as P
from ..ir.fusion import is_column_reduction, is_whole_reduction, reduction_split
from ..ir.graph import Const, Eqn, Var, run_equation
from .lowering import BOOL, FAST_RANGE, LOWERINGS, llvm_type
from .target import CompiledModule

I64 = ir.IntType(64)
BYTE = ir.IntType(8)


def _memory_type(dtype):
    return BYTE if dtype.name == "bool" else llvm_type(dtype)


def layout(shape: tuple, arrays: list, split: int | None = None) -> tuple:
    """(merged shape, element strides per operand, stride classes, how many
    merged dimensions come before ``split``) for a launch. Dimensions merge
    when contiguous for every operand, never across ``split`` (the boundary
    between a reduction's kept and reduced dimensions). Raises ValueError
    when an operand does not fit the iteration shape."""
    ndim = len(shape)
    split = ndim if split is None else split
    strides = []
    for a in arrays:
        if a.ndim > ndim or any(s not in (1, t) for s, t in zip(a.shape[::-1], shape[::-1])):
            raise ValueError(f"operand of shape {a.shape} does not broadcast to {shape}")
        padded = (0,) * (ndim - a.ndim) + tuple(
            0 if s == 1 and t != 1 else st // a.itemsize
            for s, t, st in zip(a.shape, shape[ndim - a.ndim :], a.strides)
        )
        strides.append(padded)
    merged_shape, merged, before_split = [], [[] for _ in arrays], 0
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
    classes = tuple(m[-1] if m[-1] in (0, 1) else "s" for m in merged)
    return tuple(merged_shape), merged, classes, before_split


class KernelCode:
    """One fused kernel, compiled for each operand layout it meets."""

    def __init__(self, kernel):
        self.kernel = kernel
        # 0-d constants become LLVM constants; every other input is an argument
        self.args = [v for v in kernel.inputs if not (isinstance(v, Const) and v.value.ndim == 0)]
        guard_eqns, self.guards = _range_guards(kernel)
        self.body = kernel.eqns + guard_eqns
        reductions = kernel.reductions + self.guards
        self.reducers = [Reducer(r) for r in reductions]
        # Row reductions (trailing axes, or everything) accumulate in registers
        # and are stored when a row ends; column reductions (leading axes:
        # gradients of broadcast operands) add every element into an
        # accumulator array. Both kinds split the dimensions at one place.
        # Reductions of everything accumulate like rows but, when rows or
        # columns set the split, are reset and stored once per launch.
        partial = [r for r in kernel.reductions if not is_whole_reduction(r)]
        if partial:
            self.split = reduction_split(partial[0])
        else:
            self.split = 0 if reductions else len(kernel.shape)
        self.wholes = [r for r in self.reducers if r.whole and partial]
        self.rows = [r for r in self.reducers if not r.column and not (r.whole and partial)]
        self.variants: dict = {}  # (ndim, stride classes) -> compiled function
        self.launches: dict = {}  # operand layouts -> how to launch
        self.modules: list = []

    @property
    def name(self) -> str:
        return self.kernel.name

    @property
    def eqns(self) -> list:
        """The IR equations fused into this kernel."""
        return self.kernel.eqns

    def __repr__(self) -> str:
        eqns = self.kernel.eqns + self.kernel.reductions
        ops = " ".join(e.prim.name for e in eqns)
        return f"<kernel {self.name}: {len(eqns)} ops ({ops}) over {self.kernel.shape}>"

    @property
    def llvm_ir(self) -> str:
        """The optimized LLVM IR of every layout compiled so far."""
        return "\n".join(m.optimized_ir for m in self.modules)

    @property
    def asm(self) -> str:
        return "\n".join(m.asm for m in self.modules)

    @property
    def results(self) -> list:
        """The values a launch returns: elementwise outputs, then reductions."""
        return self.kernel.outputs + [r.out for r in self.kernel.reductions]

    def _allocate(self):
        """Output arrays, and the reductions' arrays: results for row and
        whole reductions; for column reductions accumulators starting at the
        identity, which the kernel adds every row into."""
        shape, split = self.kernel.shape, self.split
        outputs = [np.empty(shape, v.dtype.np) for v in self.kernel.outputs]
        return outputs, [
            np.full(shape[split:], r.start, r.eqn.out.dtype.np)
            if r.column
            else np.zeros(() if r.whole else shape[:split], r.eqn.out.dtype.np)
            for r in self.reducers
        ]

    def __call__(self, arrays: list) -> list:
        key = tuple((a.dtype.char, a.shape, a.strides) for a in arrays)
        launch = self.launches.get(key)
        if launch is None:
            launch = self.launches[key] = self._prepare(arrays)
        if launch is _SMALL:
            return self._numpy(arrays)
        outputs, sums = self._allocate()
        if launch is not _EMPTY:
            function, shape_arg, stride_arg = launch
            function(
                shape_arg.ctypes.data,
                stride_arg.ctypes.data,
                *[a.ctypes.data for a in arrays + outputs + sums],
            )
        reductions, flags = sums[: len(self.kernel.reductions)], sums[len(self.kernel.reductions) :]
        if any(flags):
            return self._numpy(arrays)  # an argument beyond a fast lowering's range
        return outputs + reductions

    def _prepare(self, arrays: list):
        """Checks the operands once per layout and picks how to run it."""
        kernel = self.kernel
        for v, a in zip(self.args, arrays):
            if a.dtype != v.dtype.np:
                raise TypeError(
                    f"{self.name}: operand of dtype {a.dtype} where {v.dtype.name} was compiled"
                )
            if any(s % a.itemsize for s in a.strides):
                raise ValueError(f"{self.name}: operand strides {a.strides} are not whole elements")
        outputs, sums = self._allocate()
        reduced = (1,) * (len(kernel.shape) - self.split)  # row results broadcast over them
        sums = [
            a if r.column else a.reshape((1,) * len(kernel.shape) if r.whole else a.shape + reduced)
            for a, r in zip(sums, self.reducers)
        ]
        operands = arrays + outputs + sums
        shape, strides, classes, first = layout(kernel.shape, operands, self.split)
        if any(s == 0 for s in kernel.shape):
            return _EMPTY
        if int(np.prod(kernel.shape)) * (len(kernel.eqns) + 1) < SMALL_WORK:
            return _SMALL
        variant = (len(shape), classes, first)
        function = self.variants.get(variant)
        if function is None:
            function = self.variants[variant] = self._compile(*variant)
        return function, np.array(shape, np.int64), np.array(strides, np.int64)

    def _numpy(self, arrays: list) -> list:
        """The kernel's equations one by one in numpy: cheaper than a launch
        when there is this little to compute."""
        env = {id(v): a for v, a in zip(self.args, arrays)}
        for eqn in self.kernel.eqns:
            env[id(eqn.out)] = run_equation(
                eqn, [env[id(v)] if id(v) in env else v.value for v in eqn.inputs]
            )
        for eqn in self.kernel.reductions:
            env[id(eqn.out)] = run_equation(eqn, [env[id(eqn.inputs[0])]])
        return [env[id(v)] for v in self.results]

    # ------------------------------------------------------------------ codegen

    def generate(self, ndim: int, classes: tuple, first: int) -> str:
        """The LLVM IR of this kernel for one operand layout. For a row
        reduction the ``first`` merged dimensions are kept and the rest
        reduced: every row's totals start at the identity and are stored when
        the row ends."""
        kernel = self.kernel
        module = ir.Module(name=self.name)
        operands = self.args + self.results + [g.out for g in self.guards]
        pointer_types = [_memory_type(v.dtype).as_pointer() for v in operands]
        signature = ir.FunctionType(
            ir.VoidType(), [I64.as_pointer(), I64.as_pointer()] + pointer_types
        )
        function = ir.Function(module, signature, name="kernel")
        for arg in function.args:
            arg.add_attribute("noalias")
        shape_ptr, stride_ptr, *pointers = function.args
        b = ir.IRBuilder(function.append_basic_block("entry"))
        dims = [b.load(b.gep(shape_ptr, [ir.Constant(I64, d)])) for d in range(ndim)]
        stride = [
            [b.load(b.gep(stride_ptr, [ir.Constant(I64, k * ndim + d)])) for d in range(ndim)]
            for k in range(len(operands))
        ]
        first_result = len(self.args) + len(kernel.outputs)
        position = {id(r): first_result + k for k, r in enumerate(self.reducers)}
        blocked = self.rows + self.wholes  # accumulated in registers, block by block
        totals = [b.alloca(r.total_type) for r in blocked]
        for reducer, total in zip(self.wholes, totals[len(self.rows) :]):
            b.store(reducer.total_identity, total)
        exit_block = function.append_basic_block("exit")

        def counted(name, start, stop, step, body):
            """for index in range(start, stop, step): body(index)"""
            header = b.block
            loop_block = function.append_basic_block(name)
            after = function.append_basic_block(name + ".after")
            b.branch(loop_block)
            b.position_at_end(loop_block)
            index = b.phi(I64, name=name)
            index.add_incoming(start, header)
            body(index)
            following = b.add(index, step)
            index.add_incoming(following, b.block)
            b.cbranch(b.icmp_signed("<", following, stop), loop_block, after)
            b.position_at_end(after)

        def advance(offsets, index, depth):
            return [b.add(o, b.mul(index, s[depth])) for o, s in zip(offsets, stride)]

        def nest(depth: int, offsets: list):
            one = ir.Constant(I64, 1)
            rows = bool(blocked)
            if depth == first and self.rows:
                for reducer, total in zip(self.rows, totals):
                    b.store(reducer.total_identity, total)
            if depth < ndim - 1:
                counted(
                    f"i{depth}",
                    ir.Constant(I64, 0),
                    dims[depth],
                    one,
                    lambda i: nest(depth + 1, advance(offsets, i, depth)),
                )
            elif not rows:
                counted(
                    f"i{depth}",
                    ir.Constant(I64, 0),
                    dims[depth],
                    one,
                    lambda i: self._accumulate_columns(
                        b,
                        pointers,
                        offsets,
                        i,
                        classes,
                        stride,
                        depth,
                        self._element(b, pointers, offsets, i, classes, stride, depth),
                    ),
                )
            else:
                counted(
                    "block",
                    ir.Constant(I64, 0),
                    dims[depth],
                    ir.Constant(I64, BLOCK),
                    lambda start: self._block(
                        b,
                        function,
                        pointers,
                        offsets,
                        start,
                        dims[depth],
                        classes,
                        stride,
                        depth,
                        totals,
                    ),
                )
            if depth == first and self.rows:
                for reducer, total in zip(self.rows, totals):
                    k = position[id(reducer)]
                    b.store(reducer.result(b, b.load(total)), b.gep(pointers[k], [offsets[k]]))

        nest(0, [ir.Constant(I64, 0)] * len(operands))
        for reducer, total in zip(self.wholes, totals[len(self.rows) :]):
            k = position[id(reducer)]
            b.store(reducer.result(b, b.load(total)), pointers[k])
        b.branch(exit_block)
        b.position_at_end(exit_block)
        b.ret_void()
        return str(module)

    def _block(self, b, function, pointers, offsets, start, size, classes, stride, depth, totals):
        """One block of a reducing kernel: vectorizable partial results in the
        element type (for sums, reassociation is allowed only here), combined
        into the totals once per block (float64 for float sums), so long sums
        stay accurate."""
        reducers = self.rows + self.wholes
        end = b.add(start, ir.Constant(I64, BLOCK))
        stop = b.select(b.icmp_signed("<", end, size), end, size)
        header = b.block
        body = function.append_basic_block("element")
        after = function.append_basic_block("element.after")
        b.branch(body)
        b.position_at_end(body)
        index = b.phi(I64, name="i")
        index.add_incoming(start, header)
        partial = []
        for reducer in reducers:
            phi = b.phi(reducer.type)
            phi.add_incoming(reducer.identity, header)
            partial.append(phi)
        env = self._element(b, pointers, offsets, index, classes, stride, depth)
        self._accumulate_columns(b, pointers, offsets, index, classes, stride, depth, env)
        updated = []
        for reducer, phi in zip(reducers, partial):
            updated.append(reducer.combine(b, phi, env[id(reducer.eqn.inputs[0])]))
            phi.add_incoming(updated[-1], b.block)  # element code may have branched
        following = b.add(index, ir.Constant(I64, 1))
        index.add_incoming(following, b.block)
        b.cbranch(b.icmp_signed("<", following, stop), body, after)
        b.position_at_end(after)
        for reducer, total, value in zip(reducers, totals, updated):
            b.store(reducer.combine_total(b, b.load(total), value), total)

    def _accumulate_columns(self, b, pointers, offsets, index, classes, stride, depth, env):
        """Column reductions: add this element into its column's accumulator
        (float64 for float sums), which lives in memory and stays in cache."""
        first = len(self.args) + len(self.kernel.outputs)
        for k, reducer in enumerate(self.reducers):
            if not reducer.column:
                continue
            pointer = _address(b, pointers, offsets, index, classes, stride, depth, first + k)
            value = env[id(reducer.eqn.inputs[0])]
            if reducer.type == BOOL:
                stored = b.icmp_signed("!=", b.load(pointer), ir.Constant(BYTE, 0))
                b.store(b.zext(reducer.combine(b, stored, value), BYTE), pointer)
            else:
                b.store(reducer.combine_total(b, b.load(pointer), value), pointer)

    def _element(self, b, pointers, offsets, index, classes, stride, depth):
        """Loads the operands, computes the equations, stores the outputs; the
        values by var, for the reductions."""
        kernel = self.kernel
        n_in = len(self.args)

        def address(k):
            return _address(b, pointers, offsets, index, classes, stride, depth, k)

        env = {}
        for k, v in enumerate(self.args):
            value = b.load(address(k))
            env[id(v)] = (
                b.icmp_signed("!=", value, ir.Constant(BYTE, 0))
                if v.dtype.name == "bool"
                else value
            )
        for eqn in self.body:
            operands = [env[id(v)] if id(v) in env else _constant(v) for v in eqn.inputs]
            env[id(eqn.out)] = LOWERINGS[eqn.prim](b, operands, eqn)
        for k, v in enumerate(kernel.outputs):
            value = env[id(v)]
            if v.dtype.name == "bool":
                value = b.zext(value, BYTE)
            b.store(value, address(n_in + k))
        return env

    def _compile(self, ndim: int, classes: tuple, first: int):
        arity = 2 + len(self.args) + len(self.results) + len(self.guards)
        function = compile_kernel(self.generate(ndim, classes, first), arity)
        self.modules.append(function.module)
        return function


BLOCK = 1024  # elements per partial sum in a reducing kernel
# Below this many element-operations a launch costs more than numpy's calls.
SMALL_WORK = 2048
_EMPTY, _SMALL = object(), object()


class Reducer:
    """How a fused reduction accumulates: sum, max or min, per element type."""

    def __init__(self, eqn):
        self.eqn = eqn
        self.kind = eqn.prim.name.removeprefix("reduce_")
        self.column = is_column_reduction(eqn)
        self.whole = is_whole_reduction(eqn)
        dtype = eqn.out.dtype
        self.type = llvm_type(dtype)
        self.floating = dtype.is_floating_point
        # Row totals of float sums are float64 (added once per block); column
        # accumulators stay in the element type, so their loop vectorizes
        # (numpy's own sums along a leading axis add rows in that type too).
        self.total_type = (
            ir.DoubleType()
            if self.kind == "sum" and self.floating and not self.column
            else self.type
        )
        self.identity = self._identity(self.type)
        self.total_identity = self._identity(self.total_type)
        self.start = self.total_identity.constant  # a column accumulator's first value

    def _identity(self, t):
        if self.kind == "sum":
            return ir.Constant(t, 0)
        if t == BOOL:
            return ir.Constant(t, 0 if self.kind == "max" else 1)
        if self.floating:
            return ir.Constant(t, float("-inf") if self.kind == "max" else float("inf"))
        bits = t.width - 1
        return ir.Constant(t, -(2**bits) if self.kind == "max" else 2**bits - 1)

    def combine(self, b, acc, value):
        if self.kind == "sum":
            return (
                b.fadd(acc, value, flags=("reassoc", "nsz")) if self.floating else b.add(acc, value)
            )
        if self.floating:  # NaN wins, as in numpy
            name = "llvm.maximum" if self.kind == "max" else "llvm.minimum"
            signature = ir.FunctionType(acc.type, [acc.type, acc.type])
            return b.call(b.module.declare_intrinsic(name, [acc.type], signature), [acc, value])
        if acc.type == BOOL:
            return b.or_(acc, value) if self.kind == "max" else b.and_(acc, value)
        return b.select(b.icmp_signed(">" if self.kind == "max" else "<", value, acc), value, acc)

    def combine_total(self, b, total, partial):
        if self.kind == "sum" and self.floating:
            if partial.type != total.type:
                partial = b.fpext(partial, total.type)
            return b.fadd(total, partial)
        return self.combine(b, total, partial)

    def result(self, b, total):
        """The total as the output element is stored."""
        if total.type != self.type:
            total = b.fptrunc(total, self.type)
        return b.zext(total, BYTE) if self.type == BOOL else total


def _address(b, pointers, offsets, index, classes, stride, depth, k):
    """Where operand ``k``'s element at ``index`` of the innermost loop lives;
    its stride there is a constant 0 or 1 unless its class says otherwise."""
    cls = classes[k]
    if cls == 0:
        position = offsets[k]
    elif cls == 1:
        position = b.add(offsets[k], index)
    else:
        position = b.add(offsets[k], b.mul(index, stride[k][depth]))
    return b.gep(pointers[k], [position])


def _constant(c):
    """A 0-d constant operand as an LLVM constant."""
    value = c.value.item()
    if c.dtype.name in ("bool", "int64", "int32"):
        value = int(value)
    return ir.Constant(llvm_type(c.dtype), value)


_compiled: dict = {}  # LLVM IR text -> function: identical kernels compile once


def compile_kernel(llvm_ir: str, arity: int):
    function = _compiled.get(llvm_ir)
    if function is None:
        module = CompiledModule(llvm_ir)
        prototype = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * arity))
        function = prototype(module.address("kernel"))
        function.module = module  # keeps the machine code alive with the function
        _compiled[llvm_ir] = function
    return function


def _range_guards(kernel) -> tuple:
    """For every equation whose fast lowering holds only over a range:
    equations computing whether its argument is beyond it, and their
    reductions over the whole kernel (a flag per launch)."""
    eqns, reductions = [], []
    for eqn in kernel.eqns:
        limit = FAST_RANGE.get(eqn.prim)
        if limit is None:
            continue
        (argument,) = eqn.inputs
        shape, dtype = argument.shape, argument.dtype
        magnitude, above, finite, beyond = (
            Var(shape, t) for t in (dtype, dtypes.bool_, dtypes.bool_, dtypes.bool_)
        )
        flag = Var((), dtypes.bool_)
        eqns += [  # the fast lowerings already give nan for inf
            Eqn(P.abs_, (argument,), {}, magnitude),
            Eqn(P.gt, (magnitude, Const(np.asarray(limit, dtype.np))), {}, above),
            Eqn(P.lt, (magnitude, Const(np.asarray(np.inf, dtype.np))), {}, finite),
            Eqn(P.logical_and, (above, finite), {}, beyond),
        ]
        reductions.append(
            Eqn(P.reduce_max, (beyond,), {"axes": tuple(range(len(argument.shape)))}, flag)
        )
    return eqns, reductions
