"""Matrix products: fusegrad's packed GEMM against numpy's OpenBLAS and
torch.mm (MKL on x86), interleaved in one process (each implementation on
idle cores, see peers.py), medians in GFLOP/s and as a share of the
machine's peak: the fused multiply-adds its cores retire per second, measured
here by a loop of independent ones. bfloat16 products (fusegrad's bfloat16
pairs where the CPU has AVX512-BF16; torch.mm's bfloat16) against the peak
of that dot product instruction (two multiply-adds a lane), else float32's.

    python benchmarks/gemm.py [--repeat 7] [--only large,W3,W7,bf16]
"""

from __future__ import annotations

import argparse
import ctypes

import numpy as np
from llvmlite import ir
from peers import _time

import fusegrad as fg
from fusegrad.codegen import packed_gemm as codegen_packed
from fusegrad.codegen.packed_gemm import _dot_of_pairs
from fusegrad.codegen.routines import _carried, _constant
from fusegrad.codegen.target import compile_function
from fusegrad.codegen.vectors import Vectors, lanes
from fusegrad.runtime import packed_gemm, threads

try:
    import torch
except ImportError:
    torch = None

# (m, k, n, dtype, x transposed, y transposed) by group
PRODUCTS = {
    "large": [
        (4096, 4096, 4096, "float32", False, False),
        (2048, 2048, 2048, "float32", False, False),
        (2048, 2048, 2048, "float64", False, False),
    ],
    # W3's MLP: forward, then the backward's weight and input gradients
    "W3": [
        (256, 784, 512, "float32", False, False),
        (256, 512, 512, "float32", False, False),
        (512, 256, 512, "float32", True, False),
        (256, 512, 512, "float32", False, True),
        (784, 256, 512, "float32", True, False),
    ],
    # W7's linear layers (16 x 64 positions)
    "W7": [
        (1024, 128, 384, "float32", False, False),
        (1024, 128, 512, "float32", False, False),
        (1024, 512, 128, "float32", False, False),
        (128, 1024, 512, "float32", True, False),
        (1024, 512, 128, "float32", False, True),
    ],
    # bfloat16 (held in float32 by fusegrad), the result rounded to bfloat16
    "bf16": [
        (4096, 4096, 4096, "bfloat16", False, False),
        (2048, 2048, 2048, "bfloat16", False, False),
        (256, 784, 512, "bfloat16", False, False),
        (784, 256, 512, "bfloat16", True, False),
        (1024, 128, 384, "bfloat16", False, False),
        (128, 1024, 512, "bfloat16", True, False),
    ],
}


def peak_gflops(dtype_name: str) -> float:
    """One core's fused multiply-adds per second (as GFLOP/s, two each):
    twelve independent chains of vector FMAs, as many as a GEMM's
    micro-kernel keeps."""
    pairs = dtype_name == "bfloat16"
    width = lanes("float32" if pairs else dtype_name)
    element = ir.FloatType() if dtype_name != "float64" else ir.DoubleType()

    def build(symbol):
        module = ir.Module()
        kind = ir.FunctionType(ir.VoidType(), [element.as_pointer(), ir.IntType(64)])
        function = ir.Function(module, kind, symbol)
        b = ir.IRBuilder(function.append_basic_block())
        vectors = Vectors(b, element, width)
        data, steps = function.args
        x, y = vectors.load(data), vectors.load(b.gep(data, [_constant(width)]))
        sums = [vectors.load(b.gep(data, [_constant(width * (2 + i))])) for i in range(12)]

        def step(k, sums):
            if pairs:
                return [_dot_of_pairs(b, vectors, x, y, a, emulated=False) for a in sums]
            return [vectors.fmuladd(x, y, a) for a in sums]

        _, sums = _carried(b, _constant(0), steps, 1, sums, step)
        total = sums[0]
        for s in sums[1:]:
            total = b.fadd(total, s)
        vectors.store(total, data)
        b.ret_void()
        return str(module)

    prototype = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)
    fma = compile_function(f"benchmark peak fma {dtype_name} {width}", build, prototype)
    data = np.full(14 * width, 0.5, np.float64 if dtype_name == "float64" else np.float32)
    steps = 20_000_000
    best = float("inf")
    for _ in range(3):
        best = min(best, _time({"fma": lambda: fma(data.ctypes.data, steps)}, 1, 1)["fma"])
    return 2 * (2 if pairs else 1) * 12 * width * steps / (best * 1e-3) / 1e9


def _operands(m, k, n, dtype, x_transposed, y_transposed, rng):
    stored = np.float32 if dtype == "bfloat16" else dtype
    x = rng.standard_normal((k, m) if x_transposed else (m, k)).astype(stored)
    y = rng.standard_normal((n, k) if y_transposed else (k, n)).astype(stored)
    if dtype == "bfloat16":
        x, y = fg.bfloat16.round(x), fg.bfloat16.round(y)
    return (x.T if x_transposed else x), (y.T if y_transposed else y)


def _runs(x, y, dtype: str) -> dict:
    """Each implementation's product of x and y (float32 holding bfloat16
    values for bfloat16: numpy has none)."""
    if dtype == "bfloat16":
        runs = {"fusegrad": lambda: packed_gemm.product(x, y, pairs=True, rounded=True)}
        if torch is not None:
            tx, ty = torch.from_numpy(x).bfloat16(), torch.from_numpy(y).bfloat16()
            runs["torch.mm"] = lambda: torch.mm(tx, ty)
        return runs
    runs = {"fusegrad": lambda: packed_gemm.product(x, y), "numpy": lambda: x @ y}
    if torch is not None:
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)  # the same strides
        runs["torch.mm"] = lambda: torch.mm(tx, ty)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--only", default=",".join(PRODUCTS))
    options = parser.parse_args()
    cores = threads.count()
    if torch is not None:
        torch.set_num_threads(cores)
    peaks = {d: peak_gflops(d) * cores for d in ("float32", "float64")}
    f32, f64 = peaks["float32"], peaks["float64"]
    print(f"{cores} cores; peak {f32:.0f} GFLOP/s float32, {f64:.0f} float64", end="")
    if codegen_packed.has_bfloat16_dot():
        peaks["bfloat16"] = peak_gflops("bfloat16") * cores
        print(f", {peaks['bfloat16']:.0f} bfloat16 (AVX512-BF16)")
    else:
        peaks["bfloat16"] = f32
        print("; no AVX512-BF16: bfloat16 products run as float32")
    rng = np.random.default_rng(0)
    header = f"{'product':<34}" + "".join(f"{h:>18}" for h in ("fusegrad", "numpy", "torch.mm"))
    for group in options.only.split(","):
        print(f"\n{group}: GFLOP/s (share of peak); medians of {options.repeat}")
        print(header + f"{'fusegrad / best':>18}")
        for m, k, n, dtype, x_transposed, y_transposed in PRODUCTS[group]:
            x, y = _operands(m, k, n, dtype, x_transposed, y_transposed, rng)
            assert packed_gemm.product(x, y) is not None
            ms = _time(_runs(x, y, dtype), options.repeat, 1)
            flops = 2 * m * n * k / 1e9
            rates = {name: flops / (t * 1e-3) for name, t in ms.items()}
            cells = [
                f"{rates[name]:8.1f} ({rates[name] / peaks[dtype]:4.0%})" if name in rates else "-"
                for name in ("fusegrad", "numpy", "torch.mm")
            ]
            best = min((t for name, t in ms.items() if name != "fusegrad"), default=None)
            marks = (" xT" if x_transposed else "") + (" yT" if y_transposed else "")
            shape = f"{m}x{k}x{n} {'bf16' if dtype == 'bfloat16' else dtype[5:]}{marks}"
            print(
                f"{shape:<34}"
                + "".join(f"{c:>18}" for c in cells)
                + (f"{ms['fusegrad'] / best:>17.2f}x" if best else f"{'-':>18}")
            )


if __name__ == "__main__":
    main()
