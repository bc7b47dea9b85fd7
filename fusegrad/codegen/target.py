"""The host target and turning LLVM IR into callable machine code.

The target machine uses the host CPU's name and features (llvmlite's default
is a generic x86-64 without AVX), and modules are optimized with the new
pass manager at O3 with loop and SLP vectorization before code generation.
"""

from __future__ import annotations

import functools

import llvmlite.binding as llvm


class CompileError(RuntimeError):
    """LLVM rejected a kernel; the message carries the kernel's IR."""


@functools.cache
def _initialized() -> bool:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return True


@functools.cache
def target_machine():
    _initialized()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    features = llvm.get_host_cpu_features().flatten()
    if "+avx512f" in features:
        # Kernels are long arithmetic loops, where full-width vectors pay off;
        # LLVM's tuning for recent Intel cores would stop at 256 bits.
        features += ",-prefer-256-bit"
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(),
        features=features,
        opt=3,
        reloc="default",
        codemodel="jitdefault",
    )


def optimize(module) -> None:
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    tuning.loop_vectorization = True
    tuning.slp_vectorization = True
    tuning.loop_unrolling = True
    builder = llvm.create_pass_builder(target_machine(), tuning)
    builder.getModulePassManager().run(module, builder)


class CompiledModule:
    """An optimized module loaded into a JIT engine: function addresses and its assembly."""

    def __init__(self, llvm_ir: str):
        _initialized()
        try:
            module = llvm.parse_assembly(llvm_ir)
            module.verify()
        except RuntimeError as exc:
            raise CompileError(f"LLVM rejected a kernel: {exc}\n{llvm_ir}") from None
        module.triple = target_machine().triple
        module.data_layout = str(target_machine().target_data)
        optimize(module)
        self.optimized_ir = str(module)
        self.asm = target_machine().emit_assembly(module)
        self.engine = llvm.create_mcjit_compiler(module, target_machine())
        self.engine.finalize_object()

    def address(self, name: str) -> int:
        return self.engine.get_function_address(name)
