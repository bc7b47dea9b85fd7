"""The tensor operations users call, as functions (``fusegrad.exp(x)``); the
Tensor methods and operators are these same functions.

Each op does PyTorch's argument handling and type promotion, then applies
primitives. Composite ops (softmax, gelu, var, ...) are compositions of
primitives with no derivative code of their own; ``_named`` only gives the
node they end in PyTorch's name, which is what ``grad_fn`` prints.

An op is a function marked ``@public`` (registry.py), which also declares its
in-place method and ``out=``, in the module of its theme:

- pointwise: arithmetic, math functions, clamp, where, comparisons, logical
  and bitwise ops, and the ops of the primitives (exp, sin, mul, eq, ...)
- activations: relu, gelu, softplus, softmax, log_softmax
- reductions: sum, mean, prod, amax, max, argmax, all, any, norm, logsumexp
- statistics: var, std, median, quantile, cov, histc, bincount
- scans: cumsum, cumprod, cummax, logcumsumexp, diff, trapezoid
- sorting: sort, argsort, topk, kthvalue, searchsorted, unique, isin
- shape: reshape, view, flatten, squeeze, permute, transpose, expand,
  repeat, flip, roll
- joining: cat, stack, hstack, split, chunk, unbind, narrow, meshgrid
- matrices: tril, triu, diagonal, diag, trace, block_diag, vander
- linear: dot, mm, bmm, matmul, outer, tensordot, kron, addmm
- gather_scatter: index_select, gather, take, scatter, index_add,
  index_put, masked_fill, masked_select
- index_tensors: nonzero, argwhere, and the positions other ops index with
- copies: clone, contiguous, to, detach
- properties: numel, is_tensor, is_floating_point, storage_offset
- foreach: torch._foreach_add, _foreach_mul_, ... (loops over lists of tensors)

arguments.py handles their arguments, composite.py names their nodes.
einsum, torch.linalg's functions, creation and random sampling are
eager/einsum.py's, eager/linalg.py's, eager/creation.py's and
eager/random.py's.
"""

from . import (  # each registers its ops
    activations,
    copies,
    foreach,
    gather_scatter,
    index_tensors,
    joining,
    linear,
    matrices,
    pointwise,
    properties,
    reductions,
    scans,
    shape,
    sorting,
    statistics,
)

# what other modules take from here besides the ops
from .arguments import (
    _NUMBERS,
    _binary,
    _eager_only,
    _floating_pair,
    _promote_all,
    _to_float,
    as_tensor_arg,
    binary_operator,
    operator_operand,
)
from .composite import _named, _rounded_once
from .index_tensors import positions
from .linear import _check_same_dtype
from .pointwise import rsub
from .reductions import divisor
from .registry import DEFINED, FUNCTIONS, METHODS, public

globals().update(DEFINED)  # ``ops.<name>``: every op registered above, as defined
