"""Native routines never reach outside their operands: every operand and
result is placed against an inaccessible page (just after its last byte, or
just before its first), so a read or write one element too far faults. The
routines run in a child process, which a fault kills, naming the case, their
items in parts on three threads as while a program owns the cores."""

import ctypes
import functools
import mmap
import os
import subprocess
import sys

import numpy as np
import pytest

from fusegrad.codegen import convolution, vectors
from fusegrad.codegen import packed_gemm as codegen_packed
from fusegrad.runtime import packed_gemm, routines, threads
from fusegrad.runtime.addresses import data_address

_kept = []  # the child's mappings live as long as it does


def _guarded(shape, dtype, side):
    """An uninitialized C-contiguous array whose bytes end where an
    inaccessible page starts (``side`` "after") or start where one ends."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    nbytes = count * dtype.itemsize
    pages = -(-max(nbytes, 1) // mmap.PAGESIZE)
    region = mmap.mmap(-1, (pages + 1) * mmap.PAGESIZE)
    _kept.append(region)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    if side == "after":
        guard, offset = base + pages * mmap.PAGESIZE, pages * mmap.PAGESIZE - nbytes
    else:
        guard, offset = base, mmap.PAGESIZE
    libc = ctypes.CDLL(None)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    if libc.mprotect(guard, mmap.PAGESIZE, 0) != 0:
        raise OSError("mprotect failed")
    return np.frombuffer(region, dtype, count, offset).reshape(shape)


def _filled(shape, dtype, side, rng):
    a = _guarded(shape, dtype, side)
    a[...] = rng.standard_normal(shape).astype(dtype)
    return a


def _cases(dtype, side, rng):
    """(name, routine, arguments) over shapes that exercise every part of
    each routine: whole and partial vectors, blocks and what is left."""
    for images, channels, size, filters, kernel in [
        (3, 1, (9, 21), 5, (5, 5)),
        (2, 3, (6, 6), 7, (3, 3)),
        (2, 2, (17,), 3, (4,)),
        (1, 1, (5, 5), 1, (5, 5)),
        (2, 2, (4, 40), 2, (1, 12)),
    ]:
        x = _filled((images, channels) + size, dtype, side, rng)
        counts = tuple(n - k + 1 for n, k in zip(size, kernel))
        w = _filled((filters, channels * int(np.prod(kernel))), dtype, side, rng)
        dy = _filled((images, filters) + counts, dtype, side, rng)
        yield f"windows_matmul {x.shape} {kernel}", routines.windows_matmul, (w, x, kernel)
        yield f"windows_dots {x.shape} {kernel}", routines.windows_dots, (dy, x, kernel)
        yield f"fold_matmul {x.shape} {kernel}", routines.fold_matmul, (w, dy, size, kernel)
    for lead, counts, kernel in [
        ((2, 3), (7, 5), (2, 2)),
        ((2,), (3, 17), (3, 3)),
        ((1, 2), (2, 3, 4), (2, 2, 2)),
        ((3,), (19,), (2,)),
    ]:
        x = _filled(lead + tuple(c * k for c, k in zip(counts, kernel)), dtype, side, rng)
        values = _filled(lead + counts, dtype, side, rng)
        yield f"take {x.shape} {kernel}", routines.take_at_tile_max, (x, x, kernel)
        yield f"put {x.shape} {kernel}", routines.put_at_tile_max, (x, values, kernel)
    for lead, size, kernel, stride, dilation in [
        ((2, 3), (9, 11), (3, 2), (2, 3), (2, 1)),
        ((2,), (14, 14), (5, 5), (1, 1), (1, 1)),
    ]:
        image = _filled(lead + size, dtype, side, rng)
        yield f"windows {image.shape}", routines.windows, (image, kernel, stride, dilation)
        cols = _filled(routines.windows(image, kernel, stride, dilation).shape, dtype, side, rng)
        yield f"fold {cols.shape}", routines.fold, (cols, size, kernel, stride, dilation)
    for batch, rows, depth, columns in [(4, 13, 70, 33), (8, 16, 100, 150), (3, 6, 784, 25)]:
        x = _filled((batch, rows, depth), dtype, side, rng)
        y = _filled((batch, depth, columns), dtype, side, rng)
        transposed = _filled((batch, columns, depth), dtype, side, rng).transpose(0, 2, 1)
        # the matrix routine's result is its own: its operands are guarded
        yield f"matmul rows {x.shape} {y.shape}", routines.matmul, (x, y)
        yield f"matmul dots {x.shape} {y.shape}", routines.matmul, (x, transposed)
    for x_shape, y_shape in [((37, 300), (300, 5)), ((3, 30, 121), (121, 7))]:
        x = _filled(x_shape, dtype, side, rng)  # one thin product, unpacked
        y = _filled(y_shape, dtype, side, rng)
        transposed = _filled(y_shape[::-1], dtype, side, rng).T
        x_transposed = _filled(x_shape[::-1], dtype, side, rng).T
        yield f"matmul unpacked {x.shape} {y.shape}", routines.matmul, (x, y)
        yield f"matmul unpacked, y transposed {x.shape}", routines.matmul, (x, transposed)
        yield f"matmul unpacked, x reversed {x.shape}", routines.matmul, (x[..., ::-1, :], y)
        if x.ndim == 2:
            yield f"matmul unpacked, x transposed {x.shape}", routines.matmul, (x_transposed, y)
    yield from _packed_cases(dtype, side, rng)


def _packed_cases(dtype, side, rng):
    products = [("packed", packed_gemm.product)]
    if dtype == np.float32:  # and as bfloat16 pairs (odd depths: a pair's half past the end)
        rounded = functools.partial(packed_gemm.product, pairs=True, rounded=True)
        products.append(("packed bfloat16, rounded", rounded))
    for x_shape, y_shape in [
        ((151, 263), (263, 41)),
        ((7, 300), (300, 12301)),
        ((3, 9, 30), (30, 20)),
    ]:
        x = _filled(x_shape, dtype, side, rng)
        y = _filled(y_shape, dtype, side, rng)
        transposed = _filled(y_shape[::-1], dtype, side, rng).T
        x_transposed = np.swapaxes(
            _filled(x_shape[:-2] + x_shape[:-3:-1], dtype, side, rng), -1, -2
        )
        for name, product in products:
            yield f"{name} {x.shape} {y.shape}", product, (x, y)
            yield f"{name}, y transposed {x.shape} {y.shape}", product, (x, transposed)
            yield f"{name}, x reversed {x.shape} {y.shape}", product, (x[..., ::-1, :], y)
            yield f"{name}, x transposed {x.shape} {y.shape}", product, (x_transposed, y)


class _GuardedResults:
    """numpy, as the packed GEMM's runtime sees it: its results against a guard page."""

    def __init__(self, side):
        self.side = side

    def empty(self, shape, dtype):
        return _guarded(shape, dtype, self.side)

    def __getattr__(self, name):
        return getattr(np, name)


def _child() -> None:
    """Every case with its operands and its result against a guard page."""
    rng = np.random.default_rng(0)
    for side in ("after", "before"):

        def run(call, *operands, side=side, split=True):
            native, shape, dtype, sizes = call
            out = _guarded(shape, dtype, side)
            addresses = (*map(data_address, operands), data_address(out))
            if split:
                routines._over_items(native, addresses, sizes, out.size)
            else:
                native(*addresses, data_address(sizes))
            return out

        def workspace(routine, count, side=side):
            size = codegen_packed.blocking(routine).workspace()
            dtype = np.float64 if routine == "float64" else np.float32
            return [data_address(_guarded((size,), dtype, side)) for _ in range(count)]

        routines._run = run
        routines.np = _GuardedResults(side)  # the unpacked products' results
        routines.SPLIT_ELEMENTS = 0
        packed_gemm.MIN_WORK = packed_gemm.SPLIT_WORK = 0
        packed_gemm.MIN_SIDE = 1
        packed_gemm.BFLOAT16_PAIRS = True  # by the emulated dot where the CPU lacks it
        packed_gemm._workspace = workspace
        packed_gemm.np = _GuardedResults(side)
        os.environ["FUSEGRAD_NUM_THREADS"] = "3"
        for in_place in (True, False):  # convolutions read windows in place, or copied
            convolution.reads_windows_in_place = lambda in_place=in_place: in_place
            for dtype in (np.float32, np.float64):
                for name, routine, arguments in _cases(dtype, side, rng):
                    print(side, np.dtype(dtype).name, name, f"in place: {in_place}", flush=True)
                    with threads.own_cores():  # items in parts, three threads
                        routine(*arguments)
        # the packed GEMM as generated for the other kind of machine (AVX-512's
        # 12x32 blocks or AVX2's 6x16), which runs here too
        other = (32, 16) if vectors.vector_registers()[1] >= 32 else (64, 32)
        host = vectors.vector_registers
        vectors.vector_registers = codegen_packed.vector_registers = lambda other=other: other
        packed_gemm._calls.clear()
        for dtype in (np.float32, np.float64):
            for name, routine, arguments in _packed_cases(dtype, side, rng):
                print(side, np.dtype(dtype).name, name, f"registers: {other}", flush=True)
                routine(*arguments)
        vectors.vector_registers = codegen_packed.vector_registers = host
        if codegen_packed.has_bfloat16_dot():  # the emulated dot, too
            has_dot = codegen_packed.has_bfloat16_dot
            codegen_packed.has_bfloat16_dot = lambda: False
            packed_gemm._calls.clear()
            for name, routine, arguments in _packed_cases(np.float32, side, rng):
                if "bfloat16" in name:
                    print(side, name, "emulated dot", flush=True)
                    routine(*arguments)
            codegen_packed.has_bfloat16_dot = has_dot
        packed_gemm._calls.clear()
    print("done", flush=True)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mprotect guard pages")
def test_routines_stay_inside_their_operands():
    here = os.path.dirname(os.path.abspath(__file__))
    script = (
        f"import sys; sys.path.insert(0, {here!r}); import test_routine_bounds as t; t._child()"
    )
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    lines = child.stdout.strip().splitlines()
    if child.returncode != 0 or not lines or lines[-1] != "done":
        last = lines[-1] if lines else "(before the first case)"
        pytest.fail(f"a routine faulted (exit {child.returncode}) in: {last}\n{child.stderr}")
