"""The graph IR's vocabulary: dtypes, shape rules and the primitives.

Knows nothing of tensors or of LLVM: the tracer binds primitives to eager
tensors, the codegen lowers them.
"""
