"""LLVM code generation for fused kernels (llvmlite).

Empty until the LLVM backend lands: every primitive's lowering will be one
entry in this package's table, keyed by the primitive.
"""
