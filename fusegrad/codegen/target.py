"""The host target and turning LLVM IR into callable machine code.

The target machine uses the host CPU's name and features (llvmlite's default
is a generic x86-64 without AVX), and modules are optimized with the new
pass manager at O3 with loop and SLP vectorization before code generation.

Machine code is kept on disk, in FUSEGRAD_CACHE_DIR (default: fusegrad/ in
the user's cache directory; empty: no disk cache), keyed by a hash of the
LLVM IR (or of a description that determines it), the CPU and its features,
the fusegrad and LLVM versions and this file (which defines the pipeline),
so a second process skips LLVM (disk_cache.py keeps the entries).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import threading
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from .. import timing
from ..version import __version__
from . import disk_cache


class CompileError(RuntimeError):
    """LLVM rejected a kernel; the message carries the kernel's IR."""


# Every call into LLVM holds _compile_lock, or _engine_lock to load into or
# look up the engine. A fork waits for both: a child copies no thread but the
# forking one, so it must not copy LLVM mid-call, holding llvmlite's lock
# (and ours) for a thread it does not have; its first compile hung forever.
_compile_lock = threading.RLock()
_engine_lock = threading.Lock()


def _hold_llvm() -> None:
    _compile_lock.acquire()
    _engine_lock.acquire()


def _release_llvm() -> None:
    _engine_lock.release()
    _compile_lock.release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_hold_llvm, after_in_parent=_release_llvm, after_in_child=_release_llvm
    )


@functools.cache
def _initialized() -> bool:
    with _compile_lock:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
    return True


@functools.cache
def target_machine():
    """The host's target machine, shared for optimizing and code generation."""
    with _compile_lock:
        return _new_target_machine()


def _new_target_machine():
    _initialized()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    features = llvm.get_host_cpu_features().flatten()
    if "+avx512f" in features:
        # Kernels are long arithmetic loops, where full-width vectors pay off;
        # LLVM's tuning for recent Intel cores would stop at 256 bits.
        features += ",-prefer-256-bit"
    if "+avx2" in features:
        # A loop reading with a constant stride of 2-4 (a pooling window's
        # view) vectorized with gathers ran at half the speed of scalar loads
        # inserted into vectors on the AMD cores measured; LLVM already avoids
        # gathers on the Intel cores whose microcode made them slow.
        features += ",+prefer-no-gather"
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(),
        features=features,
        opt=3,
        reloc="default",
        codemodel="jitdefault",
    )


@functools.cache
def cpu_features() -> dict:
    """The host CPU's features as LLVM names them: {name: whether it has it}."""
    _initialized()
    with _compile_lock:
        return dict(llvm.get_host_cpu_features())


@functools.cache
def vector_registers() -> tuple:
    """The bytes in a vector register and how many there are (AVX-512: 64
    and 32; AVX: 32 and 16; otherwise SSE's or NEON's 16 and 16)."""
    features = cpu_features()
    if features.get("avx512f"):
        return 64, 32
    if features.get("avx"):
        return 32, 16
    return 16, 16


def optimize(module) -> None:
    with _compile_lock:  # closing the pipeline's objects too, not whenever they are collected
        tuning = llvm.create_pipeline_tuning_options(speed_level=3)
        tuning.loop_vectorization = True
        tuning.slp_vectorization = True
        tuning.loop_unrolling = True
        # Interleaving copies each vectorized loop body several times: on these
        # long arithmetic bodies it took a third of W3's compile time and measured
        # no faster (the bodies already have enough independent work).
        tuning.loop_interleaving = False
        builder = llvm.create_pass_builder(target_machine(), tuning)
        passes = builder.getModulePassManager()
        passes.run(module, builder)
        for llvm_object in (passes, builder, tuning):
            llvm_object.close()


class CompiledModule:
    """Machine code for an LLVM module, loaded into the process's JIT engine:
    function addresses, and on demand the optimized IR and the assembly.

    ``source`` is the module's LLVM IR, or a function producing it: with a
    ``key`` that determines the IR (a description of what it computes), a
    module found in the disk cache never needs its IR built."""

    def __init__(self, source, key: str | None = None):
        _initialized()
        self._source = source
        key = _cache_key(key if key is not None else self.llvm_ir)
        with timing.phase("disk cache"):
            code = disk_cache.read(key)
        if code is None:
            module = self._parse()
            with timing.phase("LLVM optimization"):
                optimize(module)
            with timing.phase("machine code"), _compile_lock:
                code = target_machine().emit_object(module)
                module.close()
            with timing.phase("disk cache"):
                disk_cache.write(key, code)
            timing.counts["modules compiled"] += 1
        else:
            timing.counts["modules from the disk cache"] += 1
        with timing.phase("machine code"), _engine_lock:
            engine = _engine()
            engine.add_object_file(llvm.ObjectFileRef.from_data(code))
            engine.finalize_object()
        self._code = code

    @functools.cached_property
    def llvm_ir(self) -> str:
        return self._source() if callable(self._source) else self._source

    def _parse(self):
        source = self.llvm_ir
        with _compile_lock:
            try:
                module = llvm.parse_assembly(source)
                module.verify()
            except RuntimeError as exc:
                raise CompileError(f"LLVM rejected a kernel: {exc}\n{source}") from None
            module.triple = target_machine().triple
            module.data_layout = str(target_machine().target_data)
        return module

    @functools.cached_property
    def _optimized(self):
        module = self._parse()
        optimize(module)
        return module

    @property
    def optimized_ir(self) -> str:
        with _compile_lock:
            return str(self._optimized)

    @property
    def asm(self) -> str:
        with _compile_lock:
            return target_machine().emit_assembly(self._optimized)

    def address(self, name: str) -> int:
        with _engine_lock:
            return _engine().get_function_address(name)


# What machine code depends on beside its description: the code generator.
_GENERATOR = hashlib.sha256(
    b"".join(path.read_bytes() for path in sorted(Path(__file__).parent.glob("*.py")))
).hexdigest()
_functions: dict = {}  # description -> ctypes function: identical code compiles once


def compile_function(description: str, build_ir, prototype):
    """The native function ``build_ir(symbol)`` defines (LLVM IR), as a
    ``prototype`` (a ctypes function type), compiled once per process.
    ``description`` determines that IR: the machine code is looked up by it
    in this process and on disk, and ``build_ir`` runs only when neither
    has it."""
    key = f"{_GENERATOR}\n{description}"
    function = _functions.get(key)
    if function is None:
        with _compile_lock:  # one symbol per engine: two threads must not both load it
            function = _functions.get(key)
            if function is None:
                symbol = "fn_" + hashlib.sha256(key.encode()).hexdigest()[:32]
                module = CompiledModule(lambda: build_ir(symbol), key)
                function = prototype(module.address(symbol))
                function.module = module  # the machine code lives as long as the function
                _functions[key] = function
                if os.environ.get("FUSEGRAD_PERF_MAP"):
                    _name_for_perf(function, module, description)
    return function


def _name_for_perf(function, module: CompiledModule, description: str) -> None:
    """FUSEGRAD_PERF_MAP=1: names the function's machine code for ``perf
    report`` (which reads /tmp/perf-PID.map for code it has no file for):
    the description's first line, and for a kernel the primitives of its
    equations (``kernel_mul_exp_reduce_sum``); its size is its module's code."""
    sections = llvm.ObjectFileRef.from_data(module._code).sections()
    size = sum(section.size() for section in sections if section.is_text())
    lines = description.split("\n")
    words = lines[0].split()[:6]
    for line in lines[1:]:
        parts = line.split()
        if words[0] == "kernel" and len(parts) > 3 and parts[1] == "=":
            words.append(parts[2].split("[")[0])
    address = ctypes.cast(function, ctypes.c_void_p).value
    with open(f"/tmp/perf-{os.getpid()}.map", "a") as perf_map:
        perf_map.write(f"{address:x} {size:x} {'_'.join(words)[:200]}\n")


@functools.cache
def _engine():
    """The process's one JIT engine: loading an object into it takes a tenth
    of a millisecond, creating an engine several. Symbols must therefore be
    unique across modules. An engine owns (and frees with itself) the target
    machine it is given, hence a machine of its own."""
    return llvm.create_mcjit_compiler(llvm.parse_assembly(""), _new_target_machine())


# ---------------------------------------------------------------- disk cache keys


@functools.cache
def _target_identity() -> bytes:
    with _compile_lock:
        parts = [
            llvm.get_host_cpu_name(),
            llvm.get_host_cpu_features().flatten(),
            llvm.get_process_triple(),
            __version__,
            llvmlite.__version__,
            ".".join(map(str, llvm.llvm_version_info)),
        ]
    return "\n".join(parts).encode() + Path(__file__).read_bytes()


def _cache_key(description: str) -> str:
    return hashlib.sha256(_target_identity() + description.encode()).hexdigest()
