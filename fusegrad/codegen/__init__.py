"""LLVM code generation: fused kernels (kernels.py) lowered one primitive
at a time (lowering.py, transcendental functions in mathfns.py), drivers
that run several kernels in one call (driver.py), and compilation to
machine code with its caches (target.py, disk_cache.py).
"""
