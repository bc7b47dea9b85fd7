"""The primitives: the closed set of operations everything else is built from.

Each primitive is declared once, in one block: its numpy implementation, its
shape/dtype rule and its vector-Jacobian rules. VJP rules are written with
these same primitives, so they are differentiable themselves and higher-order
gradients need no extra code.

A VJP rule is a function whose parameter names say what it reads, in the
manner of PyTorch's derivatives.yaml: ``g`` (the output cotangent), ``out``
(the primal output), an input's name (its primal value), ``<input>_shape``,
``<input>_dtype``, ``shapes``/``i`` (for variadic inputs), and any of the
primitive's parameters. A backward node saves exactly the values its rules
name. Rules return the cotangent in the output's shape and dtype: reducing a
broadcast cotangent to the input's shape and casting it to the input's dtype
is done once, by the caller (see ``unbroadcast``). A JVP rule (``defjvp``)
reads the same, with ``t``, the input's tangent, in the place of ``g``; most
primitives need none (see ``Primitive.defjvp``). A batching rule
(``defbatch``, for vmap) computes the primitive on operands with a batch
axis in front; most primitives share one of a few (see "batching rules").

``bind`` is interpreter-agnostic: the value types that take part (the eager
Tensor, the IR's values) register a handler, and the handler of the
arguments' type runs the primitive.
"""

from __future__ import annotations

import inspect
import math

import numpy as np

from . import dtypes
from .shapes import broadcast_shapes, indexed_shape, is_symbolic, reduced_shape


class Primitive:
    """An operation of the IR. Besides its implementation, shape rule and VJP
    rules (``defvjp``): ``view``, its numpy implementation may return a view
    of its input; ``elementwise``, each output element depends on the
    elements of its operands at the same (broadcast) index only, so it
    fuses, is computed again rather than saved, and simplifies as such;
    ``public``, it is also the op ``fusegrad.<name>`` and ``Tensor.<name>``,
    its operands promoted to one dtype (``"same"``) or to a floating one
    (``"float"``); ``collective``, it communicates with the other processes
    of a group, which must all run it, in the same order: passes never fold,
    merge or drop it, and programs run collectives in the order traced;
    ``linear``, it is linear in its differentiable inputs jointly (the others,
    such as indices, only choose places), so its JVP is itself applied to the
    tangents (``defjvp``)."""

    def __init__(
        self,
        name,
        impl,
        shape_rule,
        inputs=("x",),
        backward_name=None,
        view=False,
        elementwise=False,
        public=None,
        collective=False,
        linear=False,
    ):
        self.name = name
        self.impl = impl
        self.shape_rule = shape_rule
        self.inputs = inputs
        self.variadic = inputs[-1].startswith("*")
        self.backward_name = backward_name or _camel(name) + "Backward0"
        self.view = view
        self.elementwise = elementwise
        self.public = public
        self.collective = collective
        self.linear = linear
        self.vjp_rules: dict = {}
        self.jvp_rules: dict = {}  # input name -> (rule, its tangent's parameter name)
        self.batch_rule = batch_broadcasting if elementwise else None  # see defbatch
        self.rule_args: dict = {}
        self._rule_specs: dict = {}  # (position, count) -> ((name, kind, payload), ...)

    def __repr__(self) -> str:
        return self.name

    def compute(self, values: list, operand_dtypes, out_dtype, params: dict):
        """The implementation on ``values`` as their dtypes store them. Where
        float16 or bfloat16 takes part it computes in their float32 storage
        and rounds a reduced result once, as PyTorch's CPU kernels do; a
        Python number beside a reduced tensor is a float32 constant (PyTorch
        computes ``half * 0.1`` with 0.1 in float32), except that a
        comparison rounds its operands to their type, as PyTorch's do."""
        if out_dtype.reduced or any(d.reduced for d in operand_dtypes):
            if out_dtype is dtypes.bool_:
                values = [d.round(v) if d.reduced else v for d, v in zip(operand_dtypes, values)]
            out = self.impl(*values, **params)
            return out_dtype.round(out) if out_dtype.reduced and not self.view else out
        return self.impl(*values, **params)

    def __call__(self, *args, **params):
        return _dispatch(self, args, params)

    def defvjp(self, **rules):
        """Declares the VJP rule of each differentiable input, by input name."""
        for input_name, rule in rules.items():
            known = {n.lstrip("*") for n in self.inputs}
            if input_name not in known:
                raise ValueError(f"{self.name} has no input {input_name!r}")
            self.vjp_rules[input_name] = rule
            self.rule_args[input_name] = tuple(inspect.signature(rule).parameters)
            if self.elementwise:
                # a diagonal Jacobian: the VJP rule, given the tangent in the
                # output's shape as its cotangent, is the JVP rule
                self.jvp_rules.setdefault(input_name, (rule, "g"))
        return self

    def defjvp(self, **rules):
        """Declares the JVP rule of each differentiable input, by input name:
        its contribution to the output's tangent (broadcast to the output's
        shape and cast to its dtype once, by the caller), given ``t``, the
        input's tangent, and what a VJP rule may read. Elementwise
        primitives derive theirs from their VJP rules; linear ones apply
        themselves to the tangents; the others without one get the transpose
        of their VJP rule (autograd/forward_ad.py)."""
        for input_name, rule in rules.items():
            if input_name not in {n.lstrip("*") for n in self.inputs}:
                raise ValueError(f"{self.name} has no input {input_name!r}")
            self.jvp_rules[input_name] = (rule, "t")
        return self

    def defbatch(self, rule):
        """Declares the batching rule (vmap): ``rule(prim, batch, args,
        batched, params)`` computes the primitive on ``args``, those that
        ``batched`` marks carrying a batch axis in front (``batch.size``
        long), and returns the result with the batch axis in front. Written
        with primitives, as VJP rules are; elementwise primitives have
        theirs (``batch_broadcasting``), and the rules below serve most
        others. Without one, vmap computes the primitive one batch element
        at a time (``batch_by_loop``)."""
        self.batch_rule = rule
        return self

    def jvp_rule_for(self, position: int):
        """(rule, tangent parameter) of input ``position``, or None."""
        return self.jvp_rules.get(self.input_name(position))

    def input_name(self, position: int) -> str:
        if position < len(self.inputs) - 1 or not self.variadic:
            return self.inputs[position]
        return self.inputs[-1][1:]

    def rule_for(self, position: int):
        return self.vjp_rules.get(self.input_name(position))

    def input_positions(self, name: str, count: int) -> tuple:
        """The positions the input called ``name`` takes among ``count`` operands."""
        if self.variadic and name == self.inputs[-1][1:]:
            return tuple(range(len(self.inputs) - 1, count))
        return (self.inputs.index(name),)

    def rule_argument(self, name: str, count: int) -> tuple:
        """What a VJP rule's parameter ``name`` refers to, as (kind, payload):
        ("g",), ("out",), ("i",), ("shapes",), ("shape", position),
        ("dtype", position), ("value", position), ("values", positions) or
        ("param", name)."""
        if name in ("g", "out", "i", "shapes"):
            return (name,)
        inputs = {n.lstrip("*") for n in self.inputs}
        if name in inputs:
            positions = self.input_positions(name, count)
            if self.variadic and name == self.inputs[-1][1:]:
                return ("values", positions)
            return ("value", positions[0])
        stem, _, suffix = name.rpartition("_")
        if stem in inputs and suffix in ("shape", "dtype"):
            return (suffix, self.input_positions(stem, count)[0])
        return ("param", name)

    def vjp_arguments(self, position: int, count: int, g, out, value, shapes, dtypes, params):
        """The keyword arguments of the VJP rule of input ``position`` (of
        ``count``): the cotangent ``g``; ``out()``, the primal output, and
        ``value(p)``, input p's primal value, fetched only when the rule names
        them; the inputs' ``shapes`` and ``dtypes``; the parameters. Eager
        autograd and the adjoint pass both fetch a rule's arguments here."""
        spec = self._rule_specs.get((position, count))
        if spec is None:
            names = self.rule_args[self.input_name(position)]
            spec = tuple((n, *self.rule_argument(n, count), None)[:3] for n in names)
            self._rule_specs[(position, count)] = spec
        return _rule_kwargs(spec, position, g, out, value, shapes, dtypes, params)

    def jvp_arguments(self, position: int, count: int, t, out, value, shapes, dtypes, params):
        """The keyword arguments of the JVP rule of input ``position``, as
        ``vjp_arguments`` fetches them, with the tangent ``t`` in the place of
        the cotangent."""
        spec = self._rule_specs.get(("jvp", position, count))
        if spec is None:
            rule, tangent = self.jvp_rule_for(position)
            names = tuple(inspect.signature(rule).parameters)
            spec = tuple(
                (n, "g", None) if n == tangent else (n, *self.rule_argument(n, count), None)[:3]
                for n in names
            )
            self._rule_specs[("jvp", position, count)] = spec
        return _rule_kwargs(spec, position, t, out, value, shapes, dtypes, params)


def _rule_kwargs(spec, position: int, g, out, value, shapes, dtypes, params) -> dict:
    """A rule's keyword arguments by its ``spec``: (name, kind, payload) per parameter."""
    kwargs = {}
    for name, kind, payload in spec:
        if kind == "g":
            kwargs[name] = g
        elif kind == "out":
            kwargs[name] = out()
        elif kind == "value":
            kwargs[name] = value(payload)
        elif kind == "values":
            kwargs[name] = tuple(value(p) for p in payload)
        elif kind == "shape":
            kwargs[name] = shapes[payload]
        elif kind == "dtype":
            kwargs[name] = dtypes[payload]
        elif kind == "shapes":
            kwargs[name] = shapes
        elif kind == "i":
            kwargs[name] = position
        else:
            kwargs[name] = params[name]
    return kwargs


_handlers: dict = {}  # value type -> handler(prim, args, params)


def register_value_type(value_type: type, handler) -> None:
    """Makes ``bind`` run ``handler(prim, args, params)`` for arguments of
    ``value_type`` (eager tensors, IR values). Value types never mix in one
    call; other arguments are Python scalars, which the handler converts."""
    _handlers[value_type] = handler


def bind(prim: Primitive, args: tuple, params: dict):
    for arg in args:
        handler = _handlers.get(arg.__class__)
        if handler is not None:
            return handler(prim, args, params)
    for arg in args:  # subclasses, such as nn.Parameter
        for value_type, handler in _handlers.items():
            if isinstance(arg, value_type):
                return handler(prim, args, params)
    raise TypeError(
        f"{prim.name}: expected at least one tensor argument, got "
        f"{', '.join(type(a).__name__ for a in args)}"
    )


_dispatch = bind  # tests swap this to observe every primitive application


def number_dtype(operand_dtypes: list):
    """The dtype Python numbers among a primitive's operands take: the first
    non-bool operand's (promotion happened before), else bool."""
    for dtype in operand_dtypes:
        if dtype.category != dtypes.BOOL:
            return dtype
    return operand_dtypes[0] if operand_dtypes else None


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


# ---------------------------------------------------------------- shape rules


def _require_float(prim_name, aval):
    if not aval.dtype.is_floating_point:
        raise TypeError(f"{prim_name} expects a floating-point tensor, got {aval.dtype}")


def _same_dtype(prim_name, *avals):
    first = avals[0].dtype
    for aval in avals[1:]:
        if aval.dtype is not first:
            raise TypeError(
                f"{prim_name}: operands must have one dtype, got "
                f"{', '.join(str(a.dtype) for a in avals)}"
            )
    return first


def _float_unary_rule(name):
    def rule(x):
        _require_float(name, x)
        return x.shape, x.dtype

    return rule


def _binary_rule(name, out_dtype=None, require=None):
    def rule(x, y):
        dtype = _same_dtype(name, x, y)
        if require is not None and dtype.category not in require:
            raise TypeError(f"{name} does not support {dtype}")
        return broadcast_shapes(x.shape, y.shape), out_dtype or dtype

    return rule


# ------------------------------------------------- helpers the rules are written with


def expand_reduced(g, shape, axes):
    """Broadcasts a reduction's cotangent back over the reduced axes."""
    return broadcast_to(reshape(g, shape=reduced_shape(shape, axes, keepdims=True)), shape=shape)


def unbroadcast(g, shape, dtype):
    """Sums a cotangent down to an input's shape and casts it to the input's
    dtype: the one place broadcasting and promotion are undone."""
    if g.shape != shape:
        lead = g.ndim - len(shape)
        axes = tuple(range(lead)) + tuple(
            lead + i for i, size in enumerate(shape) if size == 1 and g.shape[lead + i] != 1
        )
        if axes:
            g = reduce_sum(g, axes=axes)
        if g.shape != shape:
            g = reshape(g, shape=shape)
    if g.dtype is not dtype:
        g = convert(g, dtype=dtype)
    return g


def zeros_like(g):
    """Zeros of g's shape and dtype: the gradient of a piecewise constant
    function, 0 even where g is infinite or NaN (``g * 0`` is NaN there),
    as PyTorch's ``zeros_like(grad)``. ``g < g`` is false for every value,
    NaN included, and a comparison passes no gradient on, so the zeros
    need none of their own either; the simplifier folds them to a constant
    (ir/simplify.py)."""
    return convert(g < g, dtype=g.dtype)


def swap_last(x):
    perm = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    return transpose(x, perm=perm)


def _share_extremum(g, x, out, axes):
    """amax/amin gradient: split evenly between the elements that tie for the extremum."""
    hit = x == expand_reduced(out, x.shape, axes)
    count = expand_reduced(reduce_sum(convert(hit, dtype=x.dtype), axes=axes), x.shape, axes)
    return where(hit, expand_reduced(g, x.shape, axes), 0.0) / count


# ------------------------------------------------------------- batching rules
#
# vmap computes a primitive on values with a batch axis in front: a rule
# (``Primitive.defbatch``) gets the primitive, the ``batch`` (its ``size``,
# and ``constant(array, dtype)``, a value of the interpreter's type), the
# arguments, which of them are ``batched`` and the parameters. An unbatched
# argument is the same for every batch element. Most primitives take one of
# the rules here; the rest have theirs in their block.


def _batch_padded(value, ndim):
    """A batched value with axes of 1 put after its batch axis, so that its
    elements have ``ndim`` axes: it then broadcasts against unbatched values
    as its elements would."""
    missing = ndim - (value.ndim - 1)
    if missing <= 0:
        return value
    return reshape(value, shape=(value.shape[0],) + (1,) * missing + tuple(value.shape[1:]))


def _batch_materialized(batch, value, is_batched):
    """The value with a batch axis, repeated for each element if it had none."""
    if is_batched:
        return value
    return broadcast_to(value, shape=(batch.size,) + tuple(value.shape))


def _element_ndim(args, batched) -> int:
    return max(a.ndim - b for a, b in zip(args, batched))


def batch_broadcasting(prim, batch, args, batched, params):
    """For primitives that broadcast their operands' leading axes (elementwise
    ones, matrix products, LAPACK's stacks of matrices): each batched operand
    padded to the elements' rank, the unbatched ones broadcast as they are."""
    ndim = _element_ndim(args, batched)
    args = [_batch_padded(a, ndim) if b else a for a, b in zip(args, batched)]
    return prim(*args, **params)


def batch_stacked(prim, batch, args, batched, params):
    """For primitives that take leading axes as a stack of independent
    problems but want their operands' shapes to match: every operand given
    the batch axis."""
    ndim = _element_ndim(args, batched)
    args = [_batch_padded(_batch_materialized(batch, a, b), ndim) for a, b in zip(args, batched)]
    return prim(*args, **params)


def _shifted(axis):
    """An axis parameter counted past the batch axis (negative ones count from the end)."""
    if isinstance(axis, tuple):
        return tuple(_shifted(a) for a in axis)
    return axis + 1 if axis >= 0 else axis


def batch_axes(*names):
    """The rule of a primitive whose parameters ``names`` are axes of its
    operands: the batch axis goes in front of every operand, and the axes
    are counted past it."""

    def rule(prim, batch, args, batched, params):
        args = [_batch_materialized(batch, a, b) for a, b in zip(args, batched)]
        return prim(*args, **{k: _shifted(v) if k in names else v for k, v in params.items()})

    return rule


def batch_by_loop(prim, batch, args, batched, params):
    """One batch element at a time, the results stacked: the rule of last
    resort."""
    results = []
    for k in range(batch.size):
        element = [index(a, spec=(("int", k),)) if b else a for a, b in zip(args, batched)]
        out = prim(*element, **params)
        results.append(reshape(out, shape=(1,) + tuple(out.shape)))
    return concatenate(*results, axis=0)


_FULL = ("slice", None, None, None)


def _spec_in_full(spec, ndim: int) -> tuple:
    """An index spec with its ellipsis (or the missing trailing axes) spelled
    out as full slices, for an operand of ``ndim`` axes."""
    taken = sum(1 for e in spec if e[0] in ("slice", "int", "array"))
    if ("ellipsis",) not in spec:
        return tuple(spec) + (_FULL,) * (ndim - taken)
    k = spec.index(("ellipsis",))
    return tuple(spec[:k]) + (_FULL,) * (ndim - taken) + tuple(spec[k + 1 :])


def _batched_index(batch, spec, ndim, indices, batched, x_batched):
    """How to index a batched operand of ``ndim`` element axes (or, with
    ``x_batched`` False, an unbatched one by batched index arrays):
    (spec, index operands, perm, result rank). ``perm`` puts the result's
    axes in the elements' order, batch first (None if they are), for an
    element result of ``result rank`` axes. Integers beside index arrays
    are advanced indices, as numpy takes them: the broadcast arrays' axes
    go where the first advanced index was when they are adjacent, in front
    otherwise."""
    spec = _spec_in_full(spec, ndim)
    basic = sum(1 for e in spec if e[0] in ("slice", "none"))
    if not any(e[0] == "array" for e in spec):
        return (_FULL,) + spec, list(indices), None, basic
    rank = max((i.ndim - b for i, b in zip(indices, batched)), default=0)
    indices = [_batch_padded(i, rank) if b else i for i, b in zip(indices, batched)]
    advanced = [k for k, e in enumerate(spec) if e[0] in ("array", "int")]
    adjacent = advanced == list(range(advanced[0], advanced[-1] + 1))
    before = sum(1 for e in spec[: advanced[0]] if e[0] in ("slice", "none")) if adjacent else 0
    after = basic - before
    if not x_batched:  # the arrays' broadcast axes (batch first) come after ``before``
        perm = (before, *range(before), *range(before + 1, before + 1 + rank + after))
        return spec, indices, (perm if before else None), rank + basic
    positions = batch.constant(
        np.arange(batch.size).reshape((batch.size,) + (1,) * rank), dtypes.int64
    )
    perm = None
    if before:  # the batch index in front parts the arrays from their place
        perm = (
            0,
            *range(1 + rank, 1 + rank + before),
            *range(1, 1 + rank),
            *range(1 + rank + before, 1 + rank + basic),
        )
    return (("array",),) + spec, [positions, *indices], perm, rank + basic


def _batch_index(prim, batch, args, batched, params):
    x, *indices = args
    spec, indices, perm, _ = _batched_index(
        batch, params["spec"], x.ndim - batched[0], indices, batched[1:], batched[0]
    )
    out = index(x, *indices, spec=spec)
    return out if perm is None else transpose(out, perm=perm)


def _placed_values(batch, v, is_batched, perm, rank):
    """Values written at batched indexed places, in the layout indexing with
    the batched spec reads them (the inverse of ``perm``)."""
    v = _batch_padded(_batch_materialized(batch, v, is_batched), rank)
    if perm is None:
        return v
    return transpose(v, perm=tuple(np.argsort(perm).tolist()))


def _batch_scatter_add(prim, batch, args, batched, params):
    v, *indices = args
    shape = params["shape"]
    spec, indices, perm, rank = _batched_index(
        batch, params["spec"], len(shape), indices, batched[1:], True
    )
    v = _placed_values(batch, v, batched[0], perm, rank)
    return scatter_add(v, *indices, spec=spec, shape=(batch.size, *shape))


def _batch_written(prim, batch, args, batched, params):
    """index_put and scatter_extreme: x given the batch axis, v written (or
    folded in) at the batched places."""
    x, v, *indices = args
    ndim = x.ndim - batched[0]
    spec, indices, perm, rank = _batched_index(
        batch, params["spec"], ndim, indices, batched[2:], True
    )
    x = _batch_materialized(batch, x, batched[0])
    v = _placed_values(batch, v, batched[1], perm, rank)
    return prim(x, v, *indices, **{**params, "spec": spec})


# ------------------------------------------------------------ elementwise unary

# integers too (ops.neg refuses bools): -n of a traced int is recorded as neg
neg = Primitive("neg", np.negative, lambda x: (x.shape, x.dtype), elementwise=True)
neg.defvjp(x=lambda g: -g)

exp = Primitive("exp", np.exp, _float_unary_rule("exp"), elementwise=True, public="float")
exp.defvjp(x=lambda g, out: g * out)

log = Primitive("log", np.log, _float_unary_rule("log"), elementwise=True, public="float")
log.defvjp(x=lambda g, x: g / x)


def _rounded_from_float64(ufunc):
    """ufunc, float32 operands computed in float64 and rounded: numpy's own
    float32 loops are an ulp off at round arguments (log10(1000) is
    3.0000002), where PyTorch's give the correctly rounded result."""

    def impl(*xs):
        if xs[0].dtype == np.float32:
            return ufunc(*(x.astype(np.float64) for x in xs)).astype(np.float32)
        return ufunc(*xs)

    return impl


log2 = Primitive(
    "log2",
    _rounded_from_float64(np.log2),
    _float_unary_rule("log2"),
    elementwise=True,
    public="float",
)
log2.defvjp(x=lambda g, x: g / (x * math.log(2.0)))

log10 = Primitive(
    "log10",
    _rounded_from_float64(np.log10),
    _float_unary_rule("log10"),
    elementwise=True,
    public="float",
)
log10.defvjp(x=lambda g, x: g / (x * math.log(10.0)))

exp2 = Primitive(
    "exp2",
    _rounded_from_float64(np.exp2),
    _float_unary_rule("exp2"),
    elementwise=True,
    public="float",
)
exp2.defvjp(x=lambda g, out: g * out * math.log(2.0))

log1p = Primitive(
    "log1p",
    np.log1p,
    _float_unary_rule("log1p"),
    backward_name="Log1PBackward0",
    elementwise=True,
    public="float",
)
log1p.defvjp(x=lambda g, x: g / (x + 1.0))

expm1 = Primitive("expm1", np.expm1, _float_unary_rule("expm1"), elementwise=True, public="float")
expm1.defvjp(x=lambda g, out: g * (out + 1.0))

sqrt = Primitive("sqrt", np.sqrt, _float_unary_rule("sqrt"), elementwise=True, public="float")
sqrt.defvjp(x=lambda g, out: g / (out * 2.0))

sin = Primitive("sin", np.sin, _float_unary_rule("sin"), elementwise=True, public="float")
sin.defvjp(x=lambda g, x: g * cos(x))

cos = Primitive("cos", np.cos, _float_unary_rule("cos"), elementwise=True, public="float")
cos.defvjp(x=lambda g, x: -(g * sin(x)))

tanh = Primitive("tanh", np.tanh, _float_unary_rule("tanh"), elementwise=True, public="float")
tanh.defvjp(x=lambda g, out: g * (1.0 - out * out))


# The inverse and hyperbolic trigonometric functions: numpy's values (float32
# through float64, as PyTorch rounds them), the C library's in kernels.
sinh = Primitive(
    "sinh", _rounded_from_float64(np.sinh), _float_unary_rule("sinh"), elementwise=True,
    public="float",
)  # fmt: skip
cosh = Primitive(
    "cosh", _rounded_from_float64(np.cosh), _float_unary_rule("cosh"), elementwise=True,
    public="float",
)  # fmt: skip
sinh.defvjp(x=lambda g, x: g * cosh(x))
cosh.defvjp(x=lambda g, x: g * sinh(x))

asin = Primitive(
    "asin", _rounded_from_float64(np.arcsin), _float_unary_rule("asin"), elementwise=True,
    public="float",
)  # fmt: skip
asin.defvjp(x=lambda g, x: g / sqrt((1.0 - x) * (1.0 + x)))

acos = Primitive(
    "acos", _rounded_from_float64(np.arccos), _float_unary_rule("acos"), elementwise=True,
    public="float",
)  # fmt: skip
acos.defvjp(x=lambda g, x: -(g / sqrt((1.0 - x) * (1.0 + x))))

atan = Primitive(
    "atan", _rounded_from_float64(np.arctan), _float_unary_rule("atan"), elementwise=True,
    public="float",
)  # fmt: skip
atan.defvjp(x=lambda g, x: g / (x * x + 1.0))

asinh = Primitive(
    "asinh", _rounded_from_float64(np.arcsinh), _float_unary_rule("asinh"), elementwise=True,
    public="float",
)  # fmt: skip
asinh.defvjp(x=lambda g, x: g / sqrt(x * x + 1.0))

acosh = Primitive(
    "acosh", _rounded_from_float64(np.arccosh), _float_unary_rule("acosh"), elementwise=True,
    public="float",
)  # fmt: skip
acosh.defvjp(x=lambda g, x: g / sqrt((x - 1.0) * (x + 1.0)))

atanh = Primitive(
    "atanh", _rounded_from_float64(np.arctanh), _float_unary_rule("atanh"), elementwise=True,
    public="float",
)  # fmt: skip
atanh.defvjp(x=lambda g, x: g / ((1.0 - x) * (1.0 + x)))


def _sigmoid_impl(x):
    # exp of a non-positive argument only, so neither branch overflows
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


# A primitive rather than 1/(1+exp(-x)): that composition's gradient is
# inf/inf = nan once exp(-x) overflows (x < -88 in float32); this rule reuses out.
sigmoid = Primitive(
    "sigmoid", _sigmoid_impl, _float_unary_rule("sigmoid"), elementwise=True, public="float"
)
sigmoid.defvjp(x=lambda g, out: g * (out * (1.0 - out)))

# A primitive for the same reason: log1p(exp(x)) overflows, and the stable
# max(x,0) + log1p(exp(-|x|)) has the wrong second derivative at 0.
softplus = Primitive(
    "softplus",
    lambda x: np.logaddexp(x, 0).astype(x.dtype, copy=False),
    _float_unary_rule("softplus"),
    elementwise=True,
)
softplus.defvjp(x=lambda g, x: g * sigmoid(x))

# A primitive rather than where(x > 0, x, 0): one op instead of two on the
# hottest activation. The gradient at 0 is 0, as in PyTorch.
relu = Primitive(
    "relu",
    lambda x: np.maximum(x, 0).astype(x.dtype, copy=False),
    lambda x: (x.shape, x.dtype),
    elementwise=True,
)
relu.defvjp(x=lambda g, out: where(out > 0.0, g, 0.0))

_erf_scalar = np.frompyfunc(math.erf, 1, 1)
erf = Primitive(
    "erf",
    lambda x: np.asarray(_erf_scalar(x), np.float64).astype(x.dtype),
    _float_unary_rule("erf"),
    elementwise=True,
    public="float",
)
erf.defvjp(x=lambda g, x: g * (exp(-(x * x)) * (2.0 / math.sqrt(math.pi))))

# 1 - erf(x) loses every digit where erf(x) rounds to 1 (x > 4 in float32)
_erfc_scalar = np.frompyfunc(math.erfc, 1, 1)
erfc = Primitive(
    "erfc",
    lambda x: np.asarray(_erfc_scalar(x), np.float64).astype(x.dtype),
    _float_unary_rule("erfc"),
    elementwise=True,
    public="float",
)
erfc.defvjp(x=lambda g, x: g * (exp(-(x * x)) * (-2.0 / math.sqrt(math.pi))))

# Giles's approximation of erfinv ("Approximating the erfinv function", 2010),
# highest power first: one polynomial in w - 2.5 for w = -log(1 - y^2) < 5,
# one in sqrt(w) - 3 beyond; two Newton steps on erf then make it exact.
_ERFINV_CENTRAL = [
    2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 2.1858087e-04,
    -1.25372503e-03, -4.17768164e-03, 2.46640727e-01, 1.50140941,
]  # fmt: skip
_ERFINV_TAIL = [
    -2.00214257e-04, 1.00950558e-04, 1.34934322e-03, -3.67342844e-03, 5.73950773e-03,
    -7.6224613e-03, 9.43887047e-03, 1.00167406, 2.83297682,
]  # fmt: skip


def _erfinv_impl(y):
    y64 = y.astype(np.float64)
    with np.errstate(all="ignore"):
        w = -np.log((1.0 - y64) * (1.0 + y64))
        central = np.polyval(_ERFINV_CENTRAL, w - 2.5)
        tail = np.polyval(_ERFINV_TAIL, np.sqrt(w) - 3.0)
        x = np.where(w < 5.0, central, tail) * y64
        for _ in range(2):
            error = np.asarray(_erf_scalar(x), np.float64) - y64
            x = x - error / (np.exp(-(x * x)) * (2.0 / math.sqrt(math.pi)))
        x = np.where(np.abs(y64) == 1.0, np.copysign(np.inf, y64), x)
        x = np.where(np.abs(y64) > 1.0, np.nan, x)
    return x.astype(y.dtype)


erfinv = Primitive("erfinv", _erfinv_impl, _float_unary_rule("erfinv"), public="float")
erfinv.defbatch(batch_broadcasting)
erfinv.defvjp(x=lambda g, out: g * (exp(out * out) * (math.sqrt(math.pi) / 2.0)))
erfinv.defjvp(x=lambda t, out: t * (exp(out * out) * (math.sqrt(math.pi) / 2.0)))

# ------------------------------------------------------- gamma function family
# log|Gamma(x)| and its derivatives psi^(n) (digamma n = 0, then polygamma):
# each derivative rule is the next function, so every order comes for free.
# numpy has none of them: the values come from the recurrence
# psi^(n)(x) = psi^(n)(x + 1) - (-1)^n n! / x^(n+1), which moves x up to where
# the asymptotic series is exact to double precision, and, for digamma below
# 1/2, the reflection psi(x) = psi(1 - x) - pi / tan(pi x).


def _lgamma_of(value):
    try:
        return math.lgamma(value)
    except ValueError:  # the poles, 0, -1, -2, ...
        return math.inf


_lgamma_scalar = np.frompyfunc(_lgamma_of, 1, 1)
# B_2k / (2k), k = 1..7: the asymptotic series of digamma
_DIGAMMA_SERIES = [1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12]
# B_2k, k = 1..7, for the series of the higher derivatives
_BERNOULLI = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6]
_ASYMPTOTIC_FROM = 16.0  # the series' next term is below 1e-17 relative from here


def _lgamma_impl(x):
    return np.asarray(_lgamma_scalar(x.astype(np.float64)), np.float64).astype(x.dtype)


def _polygamma_values(n, x):
    """psi^(n)(x) in float64, x an array (poles give inf or nan, as PyTorch)."""
    x = np.array(x, np.float64)
    out = np.zeros_like(x)
    poles = (x <= 0) & (x == np.floor(x))
    if n == 0:
        reflected = x < 0.5
        z = np.where(reflected, 1.0 - x, x)
    else:
        reflected, z = np.zeros_like(x, bool), x.copy()
    z = np.where(poles | np.isnan(z), _ASYMPTOTIC_FROM, z)
    sign_n, factorial = (-1.0) ** (n + 1), math.factorial(n)
    while (z < _ASYMPTOTIC_FROM).any():
        low = z < _ASYMPTOTIC_FROM
        out[low] += sign_n * factorial / z[low] ** (n + 1)
        z[low] += 1.0
    if n == 0:
        inverse_square = 1.0 / (z * z)
        tail = np.zeros_like(z)
        for coefficient in reversed(_DIGAMMA_SERIES):
            tail = (tail + coefficient) * inverse_square
        out += np.log(z) - 0.5 / z - tail
        with np.errstate(all="ignore"):
            out = np.where(reflected, out - np.pi / np.tan(np.pi * x), out)
    else:
        series = math.factorial(n - 1) / z**n + factorial / (2 * z ** (n + 1))
        for k, bernoulli in enumerate(_BERNOULLI, start=1):
            series += (
                bernoulli * math.factorial(2 * k + n - 1) / math.factorial(2 * k) / z ** (2 * k + n)
            )
        out += sign_n * series
    if n == 0:
        out = np.where(poles, np.where(x == 0, -np.inf, np.nan), out)  # PyTorch's: -inf at 0 only
    else:
        out = np.where(poles, np.inf if n % 2 else -np.inf, out)
    return np.where(np.isnan(x), np.nan, out)


lgamma = Primitive("lgamma", _lgamma_impl, _float_unary_rule("lgamma"), public="float")
lgamma.defbatch(batch_broadcasting)
digamma = Primitive(
    "digamma",
    lambda x: _polygamma_values(0, x).astype(x.dtype),
    _float_unary_rule("digamma"),
    public="float",
)
digamma.defbatch(batch_broadcasting)
polygamma = Primitive(
    "polygamma",
    lambda x, n: _polygamma_values(n, x).astype(x.dtype),
    lambda x, n: _float_unary_rule("polygamma")(x),
)
polygamma.defbatch(batch_broadcasting)
lgamma.defvjp(x=lambda g, x: g * digamma(x))
digamma.defvjp(x=lambda g, x: g * polygamma(x, n=1))
polygamma.defvjp(x=lambda g, x, n: g * polygamma(x, n=n + 1))
# elementwise, though not fused: the same local derivatives
lgamma.defjvp(x=lambda t, x: t * digamma(x))
digamma.defjvp(x=lambda t, x: t * polygamma(x, n=1))
polygamma.defjvp(x=lambda t, x, n: t * polygamma(x, n=n + 1))

# GELU, x * Phi(x) for the normal distribution's Phi: a primitive, so that its
# gradient is the cotangent times one local derivative, Phi(x) + x * phi(x),
# as PyTorch computes it. Composed of erf, the gradient distributed the
# cotangent over three forward values, which a compiled step wrote to memory
# and read back.
SQRT_HALF = 1.0 / math.sqrt(2.0)
gelu = Primitive(
    "gelu",
    lambda x: x * 0.5 * (1.0 + erf.impl(x * SQRT_HALF)),
    _float_unary_rule("gelu"),
    elementwise=True,
    backward_name="GeluBackward0",
)


def _gelu_derivative(x):
    """Phi(x) + x * phi(x), phi's exp(-x*x/2) written as exp(-u*u), u the
    argument of Phi's erf: the very expression erf's approximation computes,
    so a kernel holding both computes it once."""
    u = x * SQRT_HALF
    return 0.5 * (1.0 + erf(u)) + x * (exp(-(u * u)) * (1.0 / math.sqrt(2.0 * math.pi)))


gelu.defvjp(x=lambda g, x: g * _gelu_derivative(x))

abs_ = Primitive("abs", np.abs, lambda x: (x.shape, x.dtype), elementwise=True)
abs_.defvjp(x=lambda g, x: g * sign(x))


def _sign_impl(x):
    if x.dtype.kind != "f":
        return np.sign(x)
    return np.where(np.isnan(x), x.dtype.type(0), np.sign(x))  # PyTorch's sign of NaN: 0


# Piecewise constant, as the roundings and floor_divide below: the derivative
# is 0 (PyTorch's results require grad and get zeros), so the rule is zeros.
sign = Primitive("sign", _sign_impl, lambda x: (x.shape, x.dtype), elementwise=True)
sign.defvjp(x=zeros_like)


def _rounding(name, to_integer, public="same"):
    """A primitive rounding floats to integral values (integers stay as they
    are). Piecewise constant: a zero derivative, as sign's."""

    def impl(x):
        return to_integer(x) if x.dtype.kind == "f" else x

    prim = Primitive(name, impl, lambda x: (x.shape, x.dtype), elementwise=True, public=public)
    return prim.defvjp(x=zeros_like)


floor = _rounding("floor", np.floor)
ceil = _rounding("ceil", np.ceil)
trunc = _rounding("trunc", np.trunc)
# halves to even, as PyTorch; the op (eager/ops/pointwise.py) also takes decimals=
round_ = _rounding("round", np.round, public=None)

# The cotangent's cast back to the input dtype is unbroadcast's job, so the rule is g.
convert = Primitive(
    "convert",
    lambda x, dtype: np.array(x, dtype=dtype.np, order="C"),
    lambda x, dtype: (x.shape, dtype),
    backward_name="ToCopyBackward0",
    elementwise=True,
)
convert.defvjp(x=lambda g: g)

# A float32 number as an operand of a float16 or bfloat16 operation, not
# rounded to the type: what a Python number is eagerly (a float32 constant
# beside the tensor, as PyTorch's scalar in a product), for a number a
# program takes as an input (an argument, an .item()). Converting it would
# round it, and the compiled call would differ from the eager one.
unrounded = Primitive(
    "unrounded", lambda x, dtype: x, lambda x, dtype: (x.shape, dtype), view=True, elementwise=True
)

# Identity with no derivative: detach() and .data inside a traced function.
stop_gradient = Primitive(
    "stop_gradient", lambda x: x, lambda x: (x.shape, x.dtype), view=True, elementwise=True
)
# Identity with no derivative in reverse mode and the identity's in forward
# mode: how a transform inside a trace detaches its inputs (torch.func cuts
# reverse mode's graph, not forward mode's).
forward_only = Primitive(
    "forward_only", lambda x: x, lambda x: (x.shape, x.dtype), view=True, elementwise=True
)
forward_only.defjvp(x=lambda t: t)

logical_not = Primitive(
    "logical_not", np.logical_not, lambda x: (x.shape, dtypes.bool_), elementwise=True
)

# ----------------------------------------------------------- elementwise binary

add = Primitive("add", np.add, _binary_rule("add"), inputs=("x", "y"), elementwise=True)
add.defvjp(x=lambda g: g, y=lambda g: g)

sub = Primitive("sub", np.subtract, _binary_rule("sub"), inputs=("x", "y"), elementwise=True)
sub.defvjp(x=lambda g: g, y=lambda g: -g)

mul = Primitive(
    "mul", np.multiply, _binary_rule("mul"), inputs=("x", "y"), elementwise=True, public="same"
)
mul.defvjp(x=lambda g, y: g * y, y=lambda g, x: g * x)

div = Primitive(
    "div",
    np.true_divide,
    _binary_rule("div", require=(dtypes.FLOATING,)),
    inputs=("x", "y"),
    elementwise=True,
)
div.defvjp(x=lambda g, y: g / y, y=lambda g, x, y: -(g * x) / (y * y))


def _division(name, quotient=None, kind=Primitive, **options):
    """A division with an integral quotient, exact as C's fmod is: numpy's
    ufunc of that name (or ``quotient``), raising PyTorch's error for an
    integer divided by zero (numpy gives 0 and warns); floats divided by
    zero give numpy's inf and nan. Booleans are refused before numpy makes
    int8 of them."""
    ufunc = quotient or getattr(np, name)

    def impl(x, y):
        if x.dtype.kind == "b":
            raise TypeError(f"{name} does not support bool")
        if x.dtype.kind != "f" and not np.all(y):
            raise RuntimeError("ZeroDivisionError")
        return ufunc(x, y)

    rule = _binary_rule(name, require=(dtypes.FLOATING, dtypes.INTEGER))
    options = {"public": "same", **options}
    return kind(name, impl, rule, inputs=("x", "y"), elementwise=True, **options)


def _truncated_quotient(x, y):
    """x / y rounded toward zero: a float quotient as the division rounds it,
    truncated (fmod's exact quotient is an integer less where x / y rounds
    up to one); an integer one exact (x less fmod's remainder is a multiple
    of y)."""
    if x.dtype.kind == "f":
        return np.trunc(np.true_divide(x, y))
    return np.floor_divide(x - np.fmod(x, y), y)


class _TruncatedDivision(Primitive):
    """A float16 or bfloat16 quotient is rounded to its type before it is
    truncated, as PyTorch's kernel computes it, rather than truncated in
    float32 and rounded once, as other primitives compute."""

    def compute(self, values: list, operand_dtypes, out_dtype, params: dict):
        if out_dtype.reduced and out_dtype.is_floating_point:
            return np.trunc(out_dtype.round(np.true_divide(*values)))
        return super().compute(values, operand_dtypes, out_dtype, params)


# fmod's remainder has the sign of x (the quotient truncated), remainder's
# the sign of y (the quotient floored: Python's % and //).
fmod = _division("fmod")
fmod.defvjp(x=lambda g: g, y=lambda g, x, y: -(g * trunc_divide(x, y)))
# The quotients are piecewise constant in both operands. trunc_divide is
# PyTorch's div(rounding_mode="trunc"), one primitive: its derivatives are
# zeros, where trunc of a division passes 0 / y on (NaN at y = 0).
# floor_divide has div(rounding_mode="floor")'s (PyTorch's floor_divide and
# // have none: their backward raises).
trunc_divide = _division(
    "trunc_divide",
    _truncated_quotient,
    _TruncatedDivision,
    public=None,
    backward_name="DivBackward2",
)
trunc_divide.defvjp(x=zeros_like, y=zeros_like)
floor_divide = _division("floor_divide")
floor_divide.defvjp(x=zeros_like, y=zeros_like)
remainder = _division("remainder")
remainder.defvjp(x=lambda g: g, y=lambda g, x, y: -(g * floor_divide(x, y)))

# The where() masks give PyTorch's values at 0**0 and at log(0) * 0.
pow_ = Primitive("pow", np.power, _binary_rule("pow"), inputs=("x", "y"), elementwise=True)
pow_.defvjp(
    x=lambda g, x, y: where(y == 0.0, 0.0, g * y * pow_(x, y - 1.0)),
    y=lambda g, x, y, out: where((x == 0.0) & (y >= 0.0), 0.0, g * out * log(x)),
)


def _over_squares(numerator, y, x):
    """numerator / (x^2 + y^2), 0 where that is 0: PyTorch's atan2 gradient
    at (0, 0) (the division only ever sees non-zero sums, so derivatives of
    the rule are finite there too)."""
    squares = x * x + y * y
    zero = squares == 0.0
    return where(zero, 0.0, numerator / where(zero, 1.0, squares))


atan2 = Primitive(
    "atan2",
    _rounded_from_float64(np.arctan2),
    _binary_rule("atan2", require=(dtypes.FLOATING,)),
    inputs=("y", "x"),
    elementwise=True,
    public="float",
)
atan2.defvjp(
    y=lambda g, y, x: _over_squares(g * x, y, x),
    x=lambda g, y, x: _over_squares(-(g * y), y, x),
)

# the next float after x toward y: x moved by an ulp, so its derivative in x
# is 1 (PyTorch's), in y 0 (piecewise constant)
nextafter = Primitive(
    "nextafter",
    np.nextafter,
    _binary_rule("nextafter", require=(dtypes.FLOATING,)),
    inputs=("x", "y"),
    elementwise=True,
    public="float",
)
nextafter.defvjp(x=lambda g: g, y=zeros_like)

hypot = Primitive(
    "hypot",
    np.hypot,
    _binary_rule("hypot", require=(dtypes.FLOATING,)),
    inputs=("x", "y"),
    elementwise=True,
    public="float",
)
hypot.defvjp(x=lambda g, x, out: g * (x / out), y=lambda g, y, out: g * (y / out))

# log(exp(x) + exp(y)) never overflowing; each gradient a sigmoid of the difference
logaddexp = Primitive(
    "logaddexp",
    np.logaddexp,
    _binary_rule("logaddexp", require=(dtypes.FLOATING,)),
    inputs=("x", "y"),
    elementwise=True,
    public="float",
)
logaddexp.defvjp(x=lambda g, x, y: g * sigmoid(x - y), y=lambda g, x, y: g * sigmoid(y - x))

logaddexp2 = Primitive(
    "logaddexp2",
    np.logaddexp2,
    _binary_rule("logaddexp2", require=(dtypes.FLOATING,)),
    inputs=("x", "y"),
    elementwise=True,
    public="float",
)
logaddexp2.defvjp(
    x=lambda g, x, y: g * sigmoid((x - y) * math.log(2.0)),
    y=lambda g, x, y: g * sigmoid((y - x) * math.log(2.0)),
)

# Ties split the gradient evenly, as PyTorch does; where a NaN makes the
# comparison false both operands take all of it, as in PyTorch too.
maximum = Primitive(
    "maximum", np.maximum, _binary_rule("maximum"), inputs=("x", "y"), elementwise=True
)
maximum.defvjp(
    x=lambda g, x, y: where(x < y, 0.0, where(x == y, g * 0.5, g)),
    y=lambda g, x, y: where(y < x, 0.0, where(x == y, g * 0.5, g)),
)

minimum = Primitive(
    "minimum", np.minimum, _binary_rule("minimum"), inputs=("x", "y"), elementwise=True
)
minimum.defvjp(
    x=lambda g, x, y: where(x > y, 0.0, where(x == y, g * 0.5, g)),
    y=lambda g, x, y: where(y > x, 0.0, where(x == y, g * 0.5, g)),
)

eq = Primitive(
    "eq",
    np.equal,
    _binary_rule("eq", dtypes.bool_),
    inputs=("x", "y"),
    elementwise=True,
    public="same",
)
ne = Primitive(
    "ne",
    np.not_equal,
    _binary_rule("ne", dtypes.bool_),
    inputs=("x", "y"),
    elementwise=True,
    public="same",
)
lt = Primitive(
    "lt",
    np.less,
    _binary_rule("lt", dtypes.bool_),
    inputs=("x", "y"),
    elementwise=True,
    public="same",
)
le = Primitive(
    "le",
    np.less_equal,
    _binary_rule("le", dtypes.bool_),
    inputs=("x", "y"),
    elementwise=True,
    public="same",
)
gt = Primitive(
    "gt",
    np.greater,
    _binary_rule("gt", dtypes.bool_),
    inputs=("x", "y"),
    elementwise=True,
    public="same",
)
ge = Primitive(
    "ge",
    np.greater_equal,
    _binary_rule("ge", dtypes.bool_),
    inputs=("x", "y"),
    elementwise=True,
    public="same",
)
logical_and = Primitive(
    "logical_and",
    np.logical_and,
    _binary_rule("logical_and", dtypes.bool_),
    inputs=("x", "y"),
    elementwise=True,
)
logical_or = Primitive(
    "logical_or",
    np.logical_or,
    _binary_rule("logical_or", dtypes.bool_),
    inputs=("x", "y"),
    elementwise=True,
)


def _where_rule(cond, x, y):
    if cond.dtype is not dtypes.bool_:
        raise TypeError(
            f"where expected condition to be a boolean tensor, but got a tensor "
            f"with dtype {cond.dtype.name}"
        )
    return broadcast_shapes(cond.shape, x.shape, y.shape), _same_dtype("where", x, y)


where = Primitive("where", np.where, _where_rule, inputs=("cond", "x", "y"), elementwise=True)
where.defvjp(x=lambda g, cond: where(cond, g, 0.0), y=lambda g, cond: where(cond, 0.0, g))


# The bits of integers (and of bools, for and, or, xor): no derivative, so no rules.
def _bitwise(name, impl, kinds=(dtypes.INTEGER, dtypes.BOOL)):
    return Primitive(
        name, impl, _binary_rule(name, require=kinds), inputs=("x", "y"), elementwise=True
    )


def _bitwise_not_rule(x):
    if x.dtype.category not in (dtypes.INTEGER, dtypes.BOOL):
        raise TypeError(f"bitwise_not does not support {x.dtype}")
    return x.shape, x.dtype


bitwise_and = _bitwise("bitwise_and", np.bitwise_and)
bitwise_or = _bitwise("bitwise_or", np.bitwise_or)
bitwise_xor = _bitwise("bitwise_xor", np.bitwise_xor)
bitwise_not = Primitive("bitwise_not", np.invert, _bitwise_not_rule, elementwise=True)
# shifts by a negative count or by the width or more give 0 (-1 for a negative
# number shifted right), as PyTorch's and numpy's
left_shift = _bitwise("left_shift", np.left_shift, kinds=(dtypes.INTEGER,))
right_shift = _bitwise("right_shift", np.right_shift, kinds=(dtypes.INTEGER,))


# Euclid's algorithm per element is a loop: numpy's, in compiled programs too
gcd = Primitive("gcd", np.gcd, _binary_rule("gcd", require=(dtypes.INTEGER,)), inputs=("x", "y"))
gcd.defbatch(batch_broadcasting)
lcm = Primitive("lcm", np.lcm, _binary_rule("lcm", require=(dtypes.INTEGER,)), inputs=("x", "y"))
lcm.defbatch(batch_broadcasting)


# ------------------------------------------------------------------ reductions


def _reduction(name, ufunc, backward_name, linear=False):
    return Primitive(
        name,
        lambda x, axes: ufunc.reduce(x, axis=axes),
        lambda x, axes: (reduced_shape(x.shape, axes), x.dtype),
        backward_name=backward_name,
        linear=linear,
    ).defbatch(batch_axes("axes"))


reduce_sum = _reduction("reduce_sum", np.add, "SumBackward1", linear=True)
reduce_sum.defvjp(x=lambda g, x_shape, axes: expand_reduced(g, x_shape, axes))


def _extremum_jvp(t, x, out, axes):
    """The mean of the tangents of the elements that tie for the extremum."""
    hit = x == expand_reduced(out, x.shape, axes)
    count = reduce_sum(convert(hit, dtype=x.dtype), axes=axes)
    return reduce_sum(where(hit, t, 0.0), axes=axes) / count


reduce_max = _reduction("reduce_max", np.maximum, "AmaxBackward0")
reduce_max.defvjp(x=_share_extremum)
reduce_max.defjvp(x=_extremum_jvp)

reduce_min = _reduction("reduce_min", np.minimum, "AminBackward0")
reduce_min.defvjp(x=_share_extremum)
reduce_min.defjvp(x=_extremum_jvp)


def _prod_derivative(x, out, axes):
    # d prod / d x_i is the product of the other elements: out / x_i where
    # x_i != 0 (differentiable through out, so second order is right too),
    # and at a zero the products of the elements before and after it, as
    # PyTorch computes it (no division; exact to second order however many
    # zeros a slice holds).
    is_zero = x == 0.0
    return where(
        is_zero,
        _products_of_the_others(x, axes),
        expand_reduced(out, x.shape, axes) / where(is_zero, 1.0, x),
    )


def _prod_vjp(g, x, out, axes):
    return expand_reduced(g, x.shape, axes) * _prod_derivative(x, out, axes)


def _prod_jvp(t, x, out, axes):
    return reduce_sum(t * _prod_derivative(x, out, axes), axes=axes)


def _products_of_the_others(x, axes):
    """For each element, the product of the others of its slice over ``axes``
    (in C order): the exclusive cumulative products from either end."""
    kept = [d for d in range(x.ndim) if d not in axes]
    perm = tuple(kept + list(axes))
    moved = transpose(x, perm=perm)
    lead = moved.shape[: len(kept)]
    flat = reshape(moved, shape=lead + (math.prod(moved.shape[len(kept) :]),))
    axis = len(lead)

    def part(values, start, stop):
        return index(
            values, spec=(("slice", None, None, None),) * axis + (("slice", start, stop, None),)
        )

    one = pow_(part(flat, 0, 1), 0.0)  # ones (x ** 0 is 1 even at 0, inf and nan)
    before = concatenate(one, part(cumprod(flat, axis=axis, reverse=False), None, -1), axis=axis)
    after = concatenate(part(cumprod(flat, axis=axis, reverse=True), 1, None), one, axis=axis)
    others = reshape(before * after, shape=moved.shape)
    return transpose(others, perm=tuple(np.argsort(perm).tolist()))


reduce_prod = _reduction("reduce_prod", np.multiply, "ProdBackward1")
reduce_prod.defvjp(x=_prod_vjp)
reduce_prod.defjvp(x=_prod_jvp)

argmax = Primitive(
    "argmax",
    lambda x, axis: np.argmax(x, axis=axis),
    lambda x, axis: (reduced_shape(x.shape, (axis,)), dtypes.int64),
)
argmax.defbatch(batch_axes("axis"))
argmin = Primitive(
    "argmin",
    lambda x, axis: np.argmin(x, axis=axis),
    lambda x, axis: (reduced_shape(x.shape, (axis,)), dtypes.int64),
)
argmin.defbatch(batch_axes("axis"))

# ------------------------------------------------------- scans and sorting


def _scan(ufunc):
    """A cumulative ufunc along ``axis``, from the last element back when ``reverse``."""

    def impl(x, axis, reverse):
        if reverse:
            return np.flip(ufunc.accumulate(np.flip(x, axis), axis=axis), axis)
        return ufunc.accumulate(x, axis=axis)

    return impl


def _scan_rule(x, axis, reverse):
    return x.shape, x.dtype


cumsum = Primitive("cumsum", _scan(np.add), _scan_rule, linear=True)
cumsum.defbatch(batch_axes("axis"))
cumsum.defvjp(x=lambda g, axis, reverse: cumsum(g, axis=axis, reverse=not reverse))


def _cumprod_vjp(g, x, out, axis, reverse):
    # d out_j / d x_k (j at or past k) is the product of x up to j without x_k:
    # out_j / x_k where x_k != 0, differentiable through out. At a slice's
    # first zero the products are computed again with that zero taken as 1.
    # At its second zero they hold the first zero's x as a factor: 0, but
    # with that factor's derivative, so second derivatives are exact too.
    # Past the second zero every product holds two zeros: 0 to second order.
    def after(values):  # sums from each position to the end of the scan
        return cumsum(values, axis=axis, reverse=not reverse)

    is_zero = x == 0.0
    zeros_so_far = cumsum(convert(is_zero, dtype=x.dtype), axis=axis, reverse=reverse)
    first_zero = logical_and(is_zero, zeros_so_far == 1.0)
    second_zero = logical_and(is_zero, zeros_so_far == 2.0)
    nonzero = after(g * out) / where(is_zero, 1.0, x)
    without_first = cumprod(where(first_zero, 1.0, x), axis=axis, reverse=reverse)
    without_both = cumprod(
        where(logical_or(first_zero, second_zero), 1.0, x), axis=axis, reverse=reverse
    )
    first_zero_x = expand_reduced(
        reduce_sum(where(first_zero, x, 0.0), axes=(axis,)), x.shape, (axis,)
    )
    return where(
        first_zero,
        after(g * without_first),
        where(second_zero, first_zero_x * after(g * without_both), where(is_zero, 0.0, nonzero)),
    )


def _logcumsumexp_vjp(g, x, out, axis, reverse):
    """d out_j / d x_i is exp(x_i - out_j) for each j the scan reaches from i:
    summed over j in log space, positive and negative cotangents apart, so no
    exponential overflows (PyTorch's way)."""

    def reaching(log_weights):
        return exp(x + logcumsumexp(log_weights - out, axis=axis, reverse=not reverse))

    # a zero weight's log is -1e4, not -inf: exp underflows to exactly 0 all
    # the same, and this rule's own derivative meets no inf - inf
    positive, negative = g > 0.0, g < 0.0
    log_positive = where(positive, log(where(positive, g, 1.0)), -1e4)
    log_negative = where(negative, log(where(negative, -g, 1.0)), -1e4)
    gradient = reaching(log_positive) - reaching(log_negative)
    # a NaN cotangent is neither sign: it reaches its inputs as NaN here
    nan_reaches = cumsum(convert(g != g, dtype=g.dtype), axis=axis, reverse=not reverse) > 0.0
    return where(nan_reaches, math.nan, gradient)


def _logcumsumexp_rule(x, axis, reverse):
    _require_float("logcumsumexp", x)
    return x.shape, x.dtype


logcumsumexp = Primitive("logcumsumexp", _scan(np.logaddexp), _logcumsumexp_rule)
logcumsumexp.defbatch(batch_axes("axis"))
logcumsumexp.defvjp(x=_logcumsumexp_vjp)


def _running_extreme_impl(x, axis, minimum):
    """Where the running maximum (minimum) along ``axis`` was found: the last
    of equal values, and any NaN, which then stays the extreme (PyTorch's)."""
    values = np.moveaxis(x, axis, -1)
    running = (np.minimum if minimum else np.maximum).accumulate(values, axis=-1)
    previous = np.concatenate([values[..., :1], running[..., :-1]], axis=-1)
    with np.errstate(invalid="ignore"):
        found = (values <= previous) if minimum else (values >= previous)
    if values.dtype.kind == "f":
        found |= np.isnan(values)
    steps = np.arange(values.shape[-1])
    indices = np.maximum.accumulate(np.where(found, steps, 0), axis=-1)
    return np.ascontiguousarray(np.moveaxis(indices, -1, axis)).astype(np.int64)


# an index, piecewise constant: no rule (the values gathered with it carry the gradient)
running_extreme = Primitive(
    "running_extreme",
    _running_extreme_impl,
    lambda x, axis, minimum: (x.shape, dtypes.int64),
)
running_extreme.defbatch(batch_axes("axis"))


cumprod = Primitive("cumprod", _scan(np.multiply), _scan_rule)
cumprod.defbatch(batch_axes("axis"))
cumprod.defvjp(x=_cumprod_vjp)


def _argsort_impl(x, axis, descending):
    """Stable: equal elements keep their order. NaN sorts above every number,
    as in PyTorch (last ascending, first descending)."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    # the stable ascending order of the reversed slice, read backwards
    backwards = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return x.shape[axis] - 1 - np.flip(backwards, axis)


# The positions that sort x along axis; sort and topk gather the values with them.
argsort = Primitive(
    "argsort",
    _argsort_impl,
    lambda x, axis, descending: (x.shape, dtypes.int64),
)
argsort.defbatch(batch_axes("axis"))

# ---------------------------------------------------------------- shape ops

reshape = Primitive(
    "reshape",
    lambda x, shape: x.reshape(shape),
    lambda x, shape: (shape, x.dtype),
    backward_name="ViewBackward0",
    view=True,
    linear=True,
)
reshape.defbatch(
    lambda prim, batch, args, batched, params: reshape(
        args[0], shape=(batch.size, *params["shape"])
    )
)
reshape.defvjp(x=lambda g, x_shape: reshape(g, shape=x_shape))

transpose = Primitive(
    "transpose",
    lambda x, perm: x.transpose(perm),
    lambda x, perm: (tuple(x.shape[p] for p in perm), x.dtype),
    backward_name="PermuteBackward0",
    view=True,
    linear=True,
)
transpose.defbatch(
    lambda prim, batch, args, batched, params: transpose(
        args[0], perm=(0, *(p % len(params["perm"]) + 1 for p in params["perm"]))
    )
)
transpose.defvjp(x=lambda g, perm: transpose(g, perm=tuple(np.argsort(perm).tolist())))


def _broadcast_to_rule(x, shape):
    lead = len(shape) - len(x.shape)
    for i, size in enumerate(x.shape):
        if lead < 0 or size not in (1, shape[lead + i]):
            dim = max(lead, 0) + i
            raise RuntimeError(
                f"The expanded size of the tensor ({shape[dim] if dim < len(shape) else -1}) "
                f"must match the existing size ({size}) at non-singleton dimension {dim}.  "
                f"Target sizes: {list(shape)}.  Tensor sizes: {list(x.shape)}"
            )
    return shape, x.dtype


# The cotangent comes back in the broadcast shape; unbroadcast sums it down.
broadcast_to = Primitive(
    "broadcast_to",
    lambda x, shape: np.broadcast_to(x, shape),
    _broadcast_to_rule,
    backward_name="ExpandBackward0",
    view=True,
    elementwise=True,
)
broadcast_to.defbatch(
    lambda prim, batch, args, batched, params: broadcast_to(
        _batch_padded(args[0], len(params["shape"])), shape=(batch.size, *params["shape"])
    )
)
broadcast_to.defvjp(x=lambda g: g)


def _diagonal_length(n: int, m: int, offset: int) -> int:
    return max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))


def _diagonal_impl(x, offset, dim1, dim2):
    view = np.diagonal(x, offset, dim1, dim2)
    if x.flags.writeable:  # a view in-place ops write through, as PyTorch's
        view.flags.writeable = True
    return view


def _diagonal_rule(x, offset, dim1, dim2):
    length = _diagonal_length(x.shape[dim1], x.shape[dim2], offset)
    rest = tuple(size for d, size in enumerate(x.shape) if d not in (dim1, dim2))
    return rest + (length,), x.dtype


def embed_diagonal(g, shape, offset, dim1, dim2):
    """Zeros of ``shape`` with ``g`` (the diagonal's values, last axis) on the
    diagonal: every n-th element of the flattened (dim1, dim2) plane."""
    n, m = shape[dim1], shape[dim2]
    rest = [d for d in range(len(shape)) if d not in (dim1, dim2)]
    batch = tuple(shape[d] for d in rest)
    length = g.shape[-1]
    start = offset if offset >= 0 else -offset * m
    places = (
        ("slice", start, start + (length - 1) * (m + 1) + 1, m + 1)
        if length
        else ("slice", 0, 0, None)
    )
    spec = (("slice", None, None, None),) * len(batch) + (places,)
    plane = reshape(scatter_add(g, spec=spec, shape=batch + (n * m,)), shape=batch + (n, m))
    order = rest + [dim1, dim2]
    return transpose(plane, perm=tuple(order.index(d) for d in range(len(shape))))


diagonal = Primitive("diagonal", _diagonal_impl, _diagonal_rule, view=True, linear=True)
diagonal.defbatch(batch_axes("dim1", "dim2"))
diagonal.defvjp(
    x=lambda g, x_shape, offset, dim1, dim2: embed_diagonal(g, x_shape, offset, dim1, dim2)
)


# An index spec is a hashable tuple: ("slice", start, stop, step), ("int", i),
# ("none",), ("array",) — the next index operand — and ("ellipsis",).
def spec_to_numpy(spec, indices):
    arrays = iter(indices)
    out = []
    for entry in spec:
        kind = entry[0]
        if kind == "slice":
            out.append(slice(*entry[1:]))
        elif kind == "int":
            out.append(entry[1])
        elif kind == "none":
            out.append(None)
        elif kind == "array":
            out.append(next(arrays))
        else:
            out.append(Ellipsis)
    return tuple(out)


def selects_everything(spec) -> bool:
    """Whether an index spec is ``...`` or full slices: every element, in place."""
    return all(entry in (("ellipsis",), ("slice", None, None, None)) for entry in spec)


def _index_impl(x, *indices, spec):
    # A trailing Ellipsis makes numpy return a 0-d view, not a scalar copy,
    # when every dimension is indexed by an int: x[0] must alias x.
    return x[spec_to_numpy(spec, indices) + (Ellipsis,) * (("ellipsis",) not in spec)]


def _index_rule(x, *indices, spec):
    for idx in indices:
        if idx.dtype.category != dtypes.INTEGER:
            raise IndexError(
                f"tensors used as indices must be long or int tensors, got {idx.dtype}"
            )
    sizes = (*x.shape, *(n for idx in indices for n in idx.shape))
    if is_symbolic(sizes) or is_symbolic(spec):  # sizes that vary between calls
        return indexed_shape(x.shape, spec, [idx.shape for idx in indices]), x.dtype
    # Index a zero-strided stand-in: numpy's own rules give the result shape,
    # with nothing allocated but the result of an index-array lookup.
    stand_in = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), x.shape, (0,) * len(x.shape))
    fake = [np.zeros(idx.shape, np.intp) for idx in indices]
    try:
        return stand_in[spec_to_numpy(spec, fake)].shape, x.dtype
    except IndexError as exc:
        raise IndexError(str(exc).replace(" axis ", " dimension ")) from None


def _scatter_add_impl(v, *indices, spec, shape):
    where = spec_to_numpy(spec, indices)
    if not indices:  # a basic index reaches each element once
        out = np.zeros(shape, v.dtype)
        out[where] = v
        return out
    if v.dtype.kind == "f" and 0 not in shape:
        # np.add.at is slow: each element's flat position, then one count
        # weighted by the values (summed in float64, rounded once)
        targets = np.arange(math.prod(shape)).reshape(shape)[where]
        weights = np.broadcast_to(v, targets.shape).ravel()
        sums = np.bincount(targets.ravel(), weights, minlength=math.prod(shape))
        return sums.astype(v.dtype, copy=False).reshape(shape)
    out = np.zeros(shape, v.dtype)
    np.add.at(out, where, v)
    return out


def _scatter_extreme_impl(x, v, *indices, spec, minimum):
    out = x.copy()
    (np.minimum if minimum else np.maximum).at(out, spec_to_numpy(spec, indices), v)
    return out


def _scatter_add_rule(v, *indices, spec, shape):
    return shape, v.dtype


index = Primitive(
    "index",
    _index_impl,
    _index_rule,
    inputs=("x", "*indices"),
    backward_name="IndexBackward0",
    view=True,
    linear=True,
)
index.defbatch(_batch_index)
index.defvjp(x=lambda g, indices, x_shape, spec: scatter_add(g, *indices, spec=spec, shape=x_shape))

# x with each of v's values folded in at its indexed place by maximum (or
# minimum); NaN wins, as in PyTorch. Its gradient, shared between ties, is
# composed where it is used (scatter_reduce), so no rule.
scatter_extreme = Primitive(
    "scatter_extreme",
    _scatter_extreme_impl,
    lambda x, v, *indices, spec, minimum: (x.shape, x.dtype),
    inputs=("x", "v", "*indices"),
)
scatter_extreme.defbatch(_batch_written)

# The transpose of index: zeros of `shape` with v added at the indexed places.
scatter_add = Primitive(
    "scatter_add",
    _scatter_add_impl,
    _scatter_add_rule,
    inputs=("v", "*indices"),
    backward_name="IndexAddBackward0",
    linear=True,
)
scatter_add.defbatch(_batch_scatter_add)
scatter_add.defvjp(v=lambda g, indices, spec: index(g, *indices, spec=spec))


def _index_put_impl(x, v, *indices, spec):
    out = np.empty_like(x) if selects_everything(spec) else x.copy()  # what v overwrites
    out[spec_to_numpy(spec, indices)] = v
    return out


def _index_put_rule(x, v, *indices, spec):
    target, _ = _index_rule(x, *indices, spec=spec)
    if broadcast_shapes(v.shape, target) != target:
        raise RuntimeError(
            f"shape mismatch: value tensor of shape {list(v.shape)} cannot be "
            f"broadcast to indexing result of shape {list(target)}"
        )
    return x.shape, _same_dtype("index_put", x, v)


# Functional form of `x[spec] = v`: a copy of x with v written at the indexed places.
index_put = Primitive(
    "index_put",
    _index_put_impl,
    _index_put_rule,
    inputs=("x", "v", "*indices"),
    backward_name="CopySlices",
    linear=True,
)
index_put.defbatch(_batch_written)
index_put.defvjp(
    x=lambda g, indices, spec: index_put(g, 0.0, *indices, spec=spec),
    v=lambda g, indices, spec: index(g, *indices, spec=spec),
)


def _concatenate_rule(*xs, axis):
    dtype = _same_dtype("cat", *xs)
    first = xs[0].shape
    for k, x in enumerate(xs[1:], 1):
        if len(x.shape) != len(first) or any(
            a != b for d, (a, b) in enumerate(zip(x.shape, first)) if d != axis
        ):
            bad = next(d for d, (a, b) in enumerate(zip(x.shape, first)) if d != axis and a != b)
            raise RuntimeError(
                f"Sizes of tensors must match except in dimension {axis}. "
                f"Expected size {first[bad]} but got size {x.shape[bad]} "
                f"for tensor number {k} in the list."
            )
    return first[:axis] + (sum(x.shape[axis] for x in xs),) + first[axis + 1 :], dtype


def _concatenate_vjp(g, i, shapes, axis):
    start = sum(s[axis] for s in shapes[:i])
    spec = (("slice", None, None, None),) * axis + (
        ("slice", start, start + shapes[i][axis], None),
    )
    return index(g, spec=spec)


def _concatenate_impl(*xs, axis):
    # C-contiguous whatever the operands' layouts: numpy's result follows
    # theirs, and joined transposed values then cost their reshape a copy
    if not xs or not -xs[0].ndim <= axis < xs[0].ndim:
        return np.concatenate(xs, axis=axis)  # raises
    shape = list(xs[0].shape)
    shape[axis] = sum(x.shape[axis] if x.ndim == len(shape) else 0 for x in xs)
    out = np.empty(shape, np.result_type(*xs))
    return np.concatenate(xs, axis=axis, out=out)


concatenate = Primitive(
    "concatenate",
    _concatenate_impl,
    _concatenate_rule,
    inputs=("*xs",),
    backward_name="CatBackward0",
    linear=True,
)
concatenate.defbatch(batch_axes("axis"))
concatenate.defvjp(xs=_concatenate_vjp)


def _matmul_rule(x, y, operands=None, rounded=False):
    dtype = _same_dtype("matmul", x, y)
    if x.ndim < 2 or y.ndim < 2:
        raise RuntimeError("matmul primitive expects operands of rank >= 2")
    if x.shape[-1] != y.shape[-2]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied "
            f"({'x'.join(map(str, x.shape[-2:]))} and "
            f"{'x'.join(map(str, y.shape[-2:]))})"
        )
    batch = broadcast_shapes(x.shape[:-2], y.shape[:-2])
    return batch + (x.shape[-2], y.shape[-1]), dtype


def _matmul_impl(x, y, operands=None, rounded=False):
    if y.ndim == 2 and x.ndim > 2 and x.size:
        # stacked matrices times one matrix: one product of all their rows,
        # where numpy would make a small product per matrix
        rows = np.matmul(x.reshape(-1, x.shape[-1]), y)
        out = rows.reshape(*x.shape[:-1], y.shape[-1])
    else:
        out = np.matmul(x, y)
    return dtypes.bfloat16.round(out) if rounded else out


def _matmul_vjp_y(g, x, y_shape):
    if len(y_shape) == 2 and x.ndim > 2:
        # one matrix used by stacked ones: one product over all their rows
        # gives its gradient, not a product per matrix summed afterwards
        rows = math.prod(x.shape[:-1])
        flat_x = reshape(x, shape=(rows, x.shape[-1]))
        return matmul(swap_last(flat_x), reshape(g, shape=(rows, g.shape[-1])))
    return matmul(swap_last(x), g)


# ``operands=bfloat16``: float32 operands known to hold bfloat16 values (an
# autocast product's, found by ir/simplify.py in a graph and by eager mode
# as it runs), which the runtime multiplies as bfloat16 pairs where the CPU
# can; the result is the same float32 product, its sums in another order.
# ``rounded``: that result rounded to bfloat16 values, in float32
# (ir/simplify.rounded_products makes such products for the runtime, which
# rounds as it stores).
matmul = Primitive(
    "matmul", _matmul_impl, _matmul_rule, inputs=("x", "y"), backward_name="MmBackward0"
)
matmul.defbatch(batch_broadcasting)
matmul.defvjp(x=lambda g, y: matmul(g, swap_last(y)), y=_matmul_vjp_y)
matmul.defjvp(x=lambda t, y: matmul(t, y), y=lambda t, x: matmul(x, t))

# ---------------------------------------------------------------- linear algebra
# LAPACK through numpy, on stacks of square matrices (..., n, n). Each
# gradient is written with these and matmul, so higher orders come for free.


def _check_square(name, shape):
    if len(shape) < 2:
        raise RuntimeError(f"linalg.{name}: The input tensor A must have at least 2 dimensions.")
    if shape[-1] != shape[-2]:
        raise RuntimeError(
            f"linalg.{name}: A must be batches of square matrices, but they are "
            f"{shape[-2]} by {shape[-1]} matrices"
        )


def _square_rule(name, shape_of=lambda shape: shape):
    def rule(x):
        _require_float(f"linalg.{name}", x)
        _check_square(name, x.shape)
        return shape_of(x.shape), x.dtype

    return rule


def _lapack(name, fn, failure, square=True):
    """numpy's LAPACK call (on square matrices unless told otherwise), its
    LinAlgError as PyTorch's RuntimeError (eagerly, the values are computed
    before the shape rule runs)."""

    def impl(*arrays):
        if square:
            _check_square(name, arrays[0].shape)
        try:
            return fn(*arrays)
        except np.linalg.LinAlgError:
            raise RuntimeError(f"linalg.{name}: {failure}") from None

    return impl


_SINGULAR = "The input matrix is singular, so it has no inverse."


def _as_matrices(g):
    """A cotangent of one value per matrix, shaped to scale whole matrices."""
    return reshape(g, shape=tuple(g.shape) + (1, 1))


inverse = Primitive(
    "inverse",
    _lapack("inv", np.linalg.inv, _SINGULAR),
    _square_rule("inv"),
    backward_name="LinalgInvExBackward0",
)
inverse.defbatch(batch_broadcasting)
inverse.defvjp(x=lambda g, out: -matmul(swap_last(out), matmul(g, swap_last(out))))
inverse.defjvp(x=lambda t, out: -matmul(out, matmul(t, out)))


def _solve_rule(a, b):
    _square_rule("solve")(a)
    dtype = _same_dtype("linalg.solve", a, b)
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise RuntimeError(
            f"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
            f"({'x'.join(map(str, a.shape[-2:]))} and {'x'.join(map(str, b.shape[-2:]))})"
        )
    return broadcast_shapes(a.shape[:-2], b.shape[:-2]) + tuple(b.shape[-2:]), dtype


# X = A^-1 B: B's cotangent solves with A's transpose, and A's is minus that times X^T
solve = Primitive(
    "solve",
    _lapack("solve", np.linalg.solve, _SINGULAR),
    _solve_rule,
    inputs=("a", "b"),
    backward_name="LinalgSolveExBackward0",
)
solve.defbatch(batch_broadcasting)
solve.defvjp(
    a=lambda g, a, out: -matmul(solve(swap_last(a), g), swap_last(out)),
    b=lambda g, a: solve(swap_last(a), g),
)
solve.defjvp(a=lambda t, a, out: -solve(a, matmul(t, out)), b=lambda t, a: solve(a, t))


def _trace_of_product(a, b):
    """trace(a @ b) per matrix, without the product."""
    return reduce_sum(swap_last(a) * b, axes=(a.ndim - 2, a.ndim - 1))


det = Primitive(
    "det",
    _lapack("det", np.linalg.det, _SINGULAR),
    _square_rule("det", lambda shape: tuple(shape[:-2])),
    backward_name="LinalgDetBackward0",
)
det.defbatch(batch_broadcasting)
det.defvjp(x=lambda g, x, out: _as_matrices(g * out) * swap_last(inverse(x)))
det.defjvp(x=lambda t, x, out: out * _trace_of_product(inverse(x), t))

logabsdet = Primitive(
    "logabsdet",
    _lapack("slogdet", lambda x: np.linalg.slogdet(x)[1].astype(x.dtype, copy=False), _SINGULAR),
    _square_rule("slogdet", lambda shape: tuple(shape[:-2])),
    backward_name="LinalgSlogdetBackward0",
)
logabsdet.defbatch(batch_broadcasting)
logabsdet.defvjp(x=lambda g, x: _as_matrices(g) * swap_last(inverse(x)))
logabsdet.defjvp(x=lambda t, x: _trace_of_product(inverse(x), t))

# the sign of the determinant: piecewise constant, so no rule
det_sign = Primitive(
    "det_sign",
    _lapack("slogdet", lambda x: np.linalg.slogdet(x)[0].astype(x.dtype, copy=False), _SINGULAR),
    _square_rule("slogdet", lambda shape: tuple(shape[:-2])),
)
det_sign.defbatch(batch_broadcasting)


def _eigh_impl(x):
    values, vectors = _lapack("eigh", np.linalg.eigh, "The algorithm failed to converge.")(x)
    return np.concatenate([values[..., None, :], vectors], axis=-2)


def _eigh_parts(stacked):
    """(eigenvalues, eigenvectors) from eigh's one output: the values as its
    first row, the vectors (columns) below them."""
    rows = (("slice", None, None, None),) * (stacked.ndim - 2)
    values = index(stacked, spec=rows + (("int", 0),))
    vectors = index(stacked, spec=rows + (("slice", 1, None, None),))
    return values, vectors


def _eigh_vjp(g, out):
    """A = V diag(w) V^T: the cotangent is V (diag(gw) + F * (V^T gV)) V^T,
    F_ij = 1 / (w_j - w_i) off the diagonal, 0 on it (and where two values
    are equal, whose vectors have no derivative), made symmetric."""
    values, vectors = _eigh_parts(out)
    g_values, g_vectors = _eigh_parts(g)
    gaps = reshape(values, shape=values.shape[:-1] + (1, values.shape[-1])) - reshape(
        values, shape=values.shape + (1,)
    )
    same = gaps == 0.0
    mixed = matmul(swap_last(vectors), g_vectors)
    scaled = where(same, 0.0, mixed / where(same, 1.0, gaps))
    weighted = vectors * reshape(g_values, shape=g_values.shape[:-1] + (1, g_values.shape[-1]))
    full = matmul(matmul(vectors, scaled) + weighted, swap_last(vectors))
    return (full + swap_last(full)) * 0.5  # on symmetric matrices, as PyTorch's


# one output, values stacked over vectors, so that one LAPACK call serves both
eigh = Primitive(
    "eigh",
    _eigh_impl,
    _square_rule("eigh", lambda shape: tuple(shape[:-2]) + (shape[-1] + 1, shape[-1])),
    backward_name="LinalgEighBackward0",
)
eigh.defbatch(batch_broadcasting)
eigh.defvjp(x=_eigh_vjp)


def _eigh_jvp(t, out):
    """With M = V^T sym(T) V: the values move by M's diagonal, the vectors by
    V (F * M), F as in the VJP."""
    values, vectors = _eigh_parts(out)
    n, rows = values.shape[-1], values.ndim - 1  # rows: the axis of the stacked rows
    gaps = reshape(values, shape=values.shape[:-1] + (1, n)) - reshape(
        values, shape=values.shape + (1,)
    )
    same = gaps == 0.0
    moved = matmul(swap_last(vectors), matmul((t + swap_last(t)) * 0.5, vectors))
    d_values = diagonal(moved, offset=0, dim1=rows, dim2=rows + 1)
    d_vectors = matmul(vectors, where(same, 0.0, moved / where(same, 1.0, gaps)))
    return concatenate(reshape(d_values, shape=values.shape[:-1] + (1, n)), d_vectors, axis=rows)


eigh.defjvp(x=_eigh_jvp)


def _svd_impl(x):
    reduced = _lapack(
        "svd",
        lambda a: np.linalg.svd(a, full_matrices=False),
        "The algorithm failed to converge.",
        square=False,
    )
    u, s, vh = reduced(x)
    return np.concatenate([u, s[..., None, :], np.swapaxes(vh, -1, -2)], axis=-2)


def _svd_rule(x):
    _require_float("linalg.svd", x)
    if x.ndim < 2:
        raise RuntimeError("linalg.svd: The input tensor A must have at least 2 dimensions.")
    m, n = x.shape[-2], x.shape[-1]
    return tuple(x.shape[:-2]) + (m + 1 + n, min(m, n)), x.dtype


def svd_parts(stacked, m):
    """(U, singular values, V) from svd's one output, stacked in that order
    along the rows: U is m by k, V n by k, k the smaller size."""
    rows = (("slice", None, None, None),) * (stacked.ndim - 2)
    u = index(stacked, spec=rows + (("slice", 0, m, None),))
    values = index(stacked, spec=rows + (("int", m),))
    v = index(stacked, spec=rows + (("slice", m + 1, None, None),))
    return u, values, v


def _svd_vjp(g, out, x_shape):
    """Townsend's rule for A = U S V^T (reduced): with F_ij = 1 / (s_j^2 - s_i^2)
    off the diagonal (0 on it, and where two values are equal),
    U [(F * (U^T gU - gU^T U)) S + diag(gS) + S (F * (V^T gV - gV^T V))] V^T,
    plus, for the directions outside U's and V's spans,
    (gU - U U^T gU) S^-1 V^T + U S^-1 (gV^T - gV^T V V^T)."""
    m = x_shape[-2]
    u, values, v = svd_parts(out, m)
    g_u, g_values, g_v = svd_parts(g, m)
    row = values.shape[:-1] + (1, values.shape[-1])
    column = values.shape + (1,)
    squares = values * values
    gaps = reshape(squares, shape=row) - reshape(squares, shape=column)
    same = gaps == 0.0
    inverse_gaps = where(same, 0.0, 1.0 / where(same, 1.0, gaps))
    ut_gu = matmul(swap_last(u), g_u)
    vt_gv = matmul(swap_last(v), g_v)
    middle = (inverse_gaps * (ut_gu - swap_last(ut_gu))) * reshape(values, shape=row) + reshape(
        values, shape=column
    ) * (inverse_gaps * (vt_gv - swap_last(vt_gv)))
    core = matmul(matmul(u, middle) + u * reshape(g_values, shape=row), swap_last(v))
    reciprocal = 1.0 / values
    outside_u = (g_u - matmul(u, ut_gu)) * reshape(reciprocal, shape=row)
    outside_v = (swap_last(g_v) - matmul(swap_last(vt_gv), swap_last(v))) * reshape(
        reciprocal, shape=column
    )
    return core + matmul(outside_u, swap_last(v)) + matmul(u, outside_v)


# one output, U, the singular values and V stacked, so that one LAPACK call serves all
svd = Primitive("svd", _svd_impl, _svd_rule, backward_name="LinalgSvdBackward0")
svd.defbatch(batch_broadcasting)
svd.defvjp(x=_svd_vjp)


def _lower_part_impl(x, diagonal_scale):
    lower = np.tril(x)  # a new array
    rows = np.arange(x.shape[-1])
    lower[..., rows, rows] *= diagonal_scale
    return lower


# The lower triangle with the diagonal scaled: linear, and its own adjoint.
lower_part = Primitive(
    "lower_part", _lower_part_impl, lambda x, diagonal_scale: (x.shape, x.dtype), linear=True
)
lower_part.defbatch(batch_broadcasting)
lower_part.defvjp(x=lambda g, diagonal_scale: lower_part(g, diagonal_scale=diagonal_scale))


def _cholesky_vjp(g, out):
    """Murray's rule, A = L L^T: with P the lower part of L^T G (diagonal
    halved), the cotangent is S = L^-T P L^-1, made symmetric."""
    inverse_l = inverse(out)
    middle = lower_part(matmul(swap_last(out), g), diagonal_scale=0.5)
    s = matmul(swap_last(inverse_l), matmul(middle, inverse_l))
    return (s + swap_last(s)) * 0.5


cholesky = Primitive(
    "cholesky",
    _lapack(
        "cholesky",
        np.linalg.cholesky,
        "The factorization could not be completed because the input is not positive-definite.",
    ),
    _square_rule("cholesky"),
    backward_name="LinalgCholeskyExBackward0",
)
cholesky.defbatch(batch_broadcasting)
cholesky.defvjp(x=_cholesky_vjp)
# L' = L P, P the lower part (diagonal halved) of L^-1 sym(T) L^-T
cholesky.defjvp(
    x=lambda t, out: matmul(
        out,
        lower_part(
            matmul(inverse(out), matmul((t + swap_last(t)) * 0.5, swap_last(inverse(out)))),
            diagonal_scale=0.5,
        ),
    )
)


def _qr_impl(x, mode):
    """Q stacked over R^T: one LAPACK call for both, of one width (Q's columns)."""
    q, r = np.linalg.qr(x, mode="complete" if mode == "complete" else "reduced")
    return np.concatenate([q, np.swapaxes(r, -1, -2)], axis=-2)


def _qr_rule(x, mode):
    _require_float("linalg.qr", x)
    if x.ndim < 2:
        raise RuntimeError("linalg.qr: The input tensor A must have at least 2 dimensions.")
    m, n = x.shape[-2], x.shape[-1]
    columns = m if mode == "complete" else min(m, n)
    return tuple(x.shape[:-2]) + (m + n, columns), x.dtype


def qr_parts(stacked, m):
    """(Q, R) from qr's one output: Q's m rows above R's transpose."""
    rows = (("slice", None, None, None),) * (stacked.ndim - 2)
    q = index(stacked, spec=rows + (("slice", 0, m, None),))
    return q, swap_last(index(stacked, spec=rows + (("slice", m, None, None),)))


def _columns(x, start, stop):
    return index(
        x, spec=(("slice", None, None, None),) * (x.ndim - 1) + (("slice", start, stop, None),)
    )


def _qr_vjp_tall(q, r, g_q, g_r):
    """A = QR with R square (m >= n): with M = Q^T gQ - gQ^T Q + R gR^T - gR R^T,
    Q (gR + tril(M) R^-T) + (gQ - Q Q^T gQ) R^-T (Walter and Lehmann, 2018)."""
    qt_gq = matmul(swap_last(q), g_q)
    r_grt = matmul(r, swap_last(g_r))
    lower = lower_part(qt_gq - swap_last(qt_gq) + r_grt - swap_last(r_grt), diagonal_scale=1.0)
    outside = g_q - matmul(q, qt_gq)
    # X R^-T, a solve with R
    return matmul(q, g_r) + swap_last(solve(r, swap_last(matmul(q, lower) + outside)))


def _qr_vjp(g, x, out, mode):
    """A wide matrix [X | Y] = Q [U | V]: X = QU is a square factorization,
    V = Q^T Y sends Q gV to Y and Y gV^T to Q's cotangent."""
    if mode == "r":
        raise RuntimeError(
            "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
            "Please use linalg.qr(A, mode='reduced') if you are going to differentiate through "
            "linalg.qr."
        )
    m, n = x.shape[-2], x.shape[-1]
    if mode == "complete" and m > n:
        raise RuntimeError(
            "The QR decomposition is not differentiable when mode='complete' and nrows > ncols."
        )
    q, r = qr_parts(out, m)
    g_q, g_r = qr_parts(g, m)
    if m >= n:
        return _qr_vjp_tall(q, r, g_q, g_r)
    y, g_v = _columns(x, m, None), _columns(g_r, m, None)
    g_x = _qr_vjp_tall(q, _columns(r, 0, m), g_q + matmul(y, swap_last(g_v)), _columns(g_r, 0, m))
    return concatenate(g_x, matmul(q, g_v), axis=x.ndim - 1)


# one output, Q stacked over R^T, so that one LAPACK call serves both; mode
# "r" computes Q too, which its public function does not return
qr = Primitive("qr", _qr_impl, _qr_rule, backward_name="LinalgQrBackward0")
qr.defbatch(batch_broadcasting)
qr.defvjp(x=_qr_vjp)


# ------------------------------------------------------------------ random bits

# Philox-4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy
# as 1, 2, 3", SC 2011): a bijection of a 128-bit counter keyed by 64 bits, so
# any element of a stream is computed from its position alone (what parallel
# kernels need) and a stream's state is two integers.
PHILOX_MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
PHILOX_KEY_STEPS = (0x9E3779B9, 0xBB67AE85)  # the golden ratio's and sqrt(3)'s fraction bits
PHILOX_ROUNDS = 10
_LOW32 = np.uint64(0xFFFFFFFF)
_32 = np.uint64(32)


def philox4x32(counter: tuple, key: tuple) -> tuple:
    """The four 32-bit words Philox-4x32-10 makes of four counter words and two
    key words, each an array (or scalar) of uint64 holding a 32-bit value."""
    c0, c1, c2, c3 = (np.asarray(c, np.uint64) for c in counter)
    k0, k1 = (np.uint64(k) for k in key)
    m0, m1 = (np.uint64(m) for m in PHILOX_MULTIPLIERS)
    w0, w1 = (np.uint64(w) for w in PHILOX_KEY_STEPS)
    for _ in range(PHILOX_ROUNDS):
        # the 32x32 -> 64-bit products fit uint64 exactly: high and low halves
        p0, p1 = m0 * c0, m1 * c2
        c0, c1, c2, c3 = (p1 >> _32) ^ c1 ^ k0, p1 & _LOW32, (p0 >> _32) ^ c3 ^ k1, p0 & _LOW32
        k0, k1 = (k0 + w0) & _LOW32, (k1 + w1) & _LOW32
    return c0, c1, c2, c3


def _random_bits_impl(seed, offset, shape):
    """Element i is word i % 4 of Philox at counter offset + i // 4 (the 64-bit
    counter in the low two words, the high two zero) under the 64-bit seed."""
    size = math.prod(shape)
    counters = np.arange(-(-size // 4), dtype=np.uint64) + np.uint64(int(offset) % 2**64)
    zeros = np.zeros_like(counters)
    seed = int(seed) % 2**64
    words = philox4x32(
        (counters & _LOW32, counters >> _32, zeros, zeros), (seed & 0xFFFFFFFF, seed >> 32)
    )
    return np.stack(words, axis=-1).reshape(-1)[:size].astype(np.int64).reshape(shape)


def _random_bits_rule(seed, offset, shape):
    for name, aval in (("seed", seed), ("offset", offset)):
        if aval.shape != () or aval.dtype is not dtypes.int64:
            raise TypeError(
                f"random_bits: {name} must be a 0-d int64 tensor, got "
                f"{aval.dtype.name}{list(aval.shape)}"
            )
    return shape, dtypes.int64


# 32 random bits per element (int64 values in [0, 2**32)), a pure function of
# the generator state it is given as operands: a compiled program takes the
# state as an input and returns it advanced, as eager mode does.
random_bits = Primitive(
    "random_bits", _random_bits_impl, _random_bits_rule, inputs=("seed", "offset")
)

# ------------------------------------------- neural networks: windows, padding, losses
#
# Convolution and pooling are compositions over three primitives. ``windows``
# copies every window of the trailing axes out (im2col), so a convolution is a
# matrix product and a pooling a reduction; ``fold`` adds windows back where
# they came from (col2im). Each is the other's transpose, hence its VJP, so
# gradients of every order come free. ``pad`` pads each axis, or crops it
# with negative widths: padding by the negated widths is its transpose.


def window_count(size: int, kernel: int, stride: int, dilation: int) -> int:
    """How many windows of ``kernel`` taps ``dilation`` apart fit in ``size``, ``stride`` apart."""
    return (size - dilation * (kernel - 1) - 1) // stride + 1


def _window_view(x, kernel, stride, dilation, counts):
    """(*lead, *kernel, *counts): the windows of x's trailing axes, as a strided view."""
    lead = x.ndim - len(kernel)
    spatial = x.strides[lead:]
    return np.lib.stride_tricks.as_strided(
        x,
        x.shape[:lead] + tuple(kernel) + tuple(counts),
        x.strides[:lead]
        + tuple(s * d for s, d in zip(spatial, dilation))
        + tuple(s * st for s, st in zip(spatial, stride)),
        writeable=False,
    )


def _window_counts(spatial, kernel, stride, dilation) -> tuple:
    return tuple(map(window_count, spatial, kernel, stride, dilation))


def _windows_impl(x, kernel, stride, dilation):
    counts = _window_counts(x.shape[x.ndim - len(kernel) :], kernel, stride, dilation)
    return _window_view(x, kernel, stride, dilation, counts).copy()


def _windows_rule(x, kernel, stride, dilation):
    if x.ndim < len(kernel):
        raise RuntimeError(f"windows of {len(kernel)} axes need as many, got a {x.ndim}-d input")
    spatial = x.shape[x.ndim - len(kernel) :]
    counts = _window_counts(spatial, kernel, stride, dilation)
    if any(c < 1 for c in counts):
        raise RuntimeError(
            f"a window of {list(kernel)} taps {list(dilation)} apart does not fit in "
            f"{list(spatial)}"
        )
    return x.shape[: x.ndim - len(kernel)] + tuple(kernel) + counts, x.dtype


def _fold_impl(cols, size, kernel, stride, dilation):
    k = len(kernel)
    counts = cols.shape[cols.ndim - k :]
    out = np.zeros(cols.shape[: cols.ndim - 2 * k] + tuple(size), cols.dtype)
    # one strided add per tap: windows overlap when stride < kernel, and
    # numpy's in-place add over an overlapping view would not accumulate
    for tap in np.ndindex(*kernel):
        target = tuple(
            slice(t * d, t * d + s * (n - 1) + 1, s)
            for t, d, s, n in zip(tap, dilation, stride, counts)
        )
        out[(Ellipsis, *target)] += cols[(Ellipsis, *tap) + (slice(None),) * k]
    return out


def _fold_rule(cols, size, kernel, stride, dilation):
    k = len(kernel)
    expected = tuple(kernel) + _window_counts(size, kernel, stride, dilation)
    if cols.ndim < 2 * k or tuple(cols.shape[cols.ndim - 2 * k :]) != expected:
        raise RuntimeError(
            f"fold expects windows of shape [*, {', '.join(map(str, expected))}], "
            f"got {list(cols.shape)}"
        )
    return cols.shape[: cols.ndim - 2 * k] + tuple(size), cols.dtype


windows = Primitive(
    "windows", _windows_impl, _windows_rule, backward_name="Im2ColBackward0", linear=True
)
windows.defbatch(batch_broadcasting)
windows.defvjp(
    x=lambda g, x_shape, kernel, stride, dilation: fold(
        g,
        size=x_shape[len(x_shape) - len(kernel) :],
        kernel=kernel,
        stride=stride,
        dilation=dilation,
    )
)

fold = Primitive(
    "fold",
    _fold_impl,
    _fold_rule,
    inputs=("cols",),
    backward_name="Col2ImBackward0",
    linear=True,
)
fold.defbatch(batch_broadcasting)
fold.defvjp(
    cols=lambda g, kernel, stride, dilation: windows(
        g, kernel=kernel, stride=stride, dilation=dilation
    )
)


# A convolution of stride 1 without dilation multiplies a filter bank by
# every window of each image: ``windows_matmul`` is that product without the
# windows copied out (native routines read each window's rows from the image
# in place). ``windows_dots`` is the filter bank's gradient: each image's
# output gradient times its windows, transposed, summed over the images.
# Each is the other's VJP in its matrix operand. The image's gradient is
# ``fold_matmul``: the filters transposed times the output gradient, each
# product's windows added back where they were read (col2im) without being
# written out; its VJPs are the other two.


def _unit_windows(x, kernel):
    """(images, channels x taps, positions): the windows of stride 1 and no dilation, as a view."""
    ones = (1,) * len(kernel)
    counts = _window_counts(x.shape[2:], kernel, ones, ones)
    view = _window_view(x, kernel, ones, ones, counts)
    return view.reshape(x.shape[0], x.shape[1] * math.prod(kernel), math.prod(counts)), counts


def _windows_matmul_impl(w, x, kernel):
    cols, counts = _unit_windows(x, kernel)
    return np.matmul(w, cols).reshape((x.shape[0], w.shape[0]) + counts)


def _windows_dots_impl(dy, x, kernel):
    cols, _ = _unit_windows(x, kernel)
    flat = dy.reshape(dy.shape[0], dy.shape[1], math.prod(dy.shape[2:]))
    return np.tensordot(flat, cols, axes=([0, 2], [0, 2]))


def _unit_counts(name, x, kernel) -> tuple:
    if x.ndim != 2 + len(kernel):
        raise RuntimeError(f"{name}: {len(kernel)}-d windows of a {x.ndim}-d input")
    counts = tuple(n - k + 1 for n, k in zip(x.shape[2:], kernel))
    if min(counts, default=1) < 1:
        raise RuntimeError(f"{name}: a window of {list(kernel)} does not fit in {list(x.shape)}")
    return counts


def _windows_matmul_rule(w, x, kernel):
    dtype = _same_dtype("windows_matmul", w, x)
    counts = _unit_counts("windows_matmul", x, kernel)
    if w.ndim != 2 or w.shape[1] != x.shape[1] * math.prod(kernel):
        raise RuntimeError(
            f"windows_matmul: filters {list(w.shape)} for windows of {x.shape[1]} channels "
            f"of {list(kernel)}"
        )
    return (x.shape[0], w.shape[0]) + counts, dtype


def _windows_dots_rule(dy, x, kernel):
    dtype = _same_dtype("windows_dots", dy, x)
    counts = _unit_counts("windows_dots", x, kernel)
    if dy.ndim != 2 + len(kernel) or dy.shape[0] != x.shape[0] or tuple(dy.shape[2:]) != counts:
        raise RuntimeError(
            f"windows_dots: gradient {list(dy.shape)} for windows of {list(kernel)} of "
            f"{list(x.shape)}"
        )
    return (dy.shape[1], x.shape[1] * math.prod(kernel)), dtype


def _fold_matmul_impl(w, dy, size, kernel):
    counts = dy.shape[2:]
    flat = dy.reshape(dy.shape[0], dy.shape[1], math.prod(counts))
    products = np.matmul(np.swapaxes(w, 0, 1), flat)
    channels = w.shape[1] // math.prod(kernel)
    cols = products.reshape((dy.shape[0], channels) + tuple(kernel) + tuple(counts))
    ones = (1,) * len(kernel)
    return _fold_impl(cols, size=size, kernel=kernel, stride=ones, dilation=ones)


def _fold_matmul_rule(w, dy, size, kernel):
    dtype = _same_dtype("fold_matmul", w, dy)
    taps = math.prod(kernel)
    counts = tuple(n - k + 1 for n, k in zip(size, kernel))
    if (
        w.ndim != 2
        or dy.ndim != 2 + len(kernel)
        or len(size) != len(kernel)
        or min(counts, default=1) < 1
        or w.shape[0] != dy.shape[1]
        or w.shape[1] % taps
        or tuple(dy.shape[2:]) != counts
    ):
        raise RuntimeError(
            f"fold_matmul: filters {list(w.shape)} and gradient {list(dy.shape)} for images "
            f"of {list(size)} and windows of {list(kernel)}"
        )
    return (dy.shape[0], w.shape[1] // taps) + tuple(size), dtype


windows_matmul = Primitive(
    "windows_matmul",
    _windows_matmul_impl,
    _windows_matmul_rule,
    inputs=("w", "x"),
    backward_name="ConvolutionBackward0",
)
windows_dots = Primitive(
    "windows_dots",
    _windows_dots_impl,
    _windows_dots_rule,
    inputs=("dy", "x"),
    backward_name="ConvolutionBackwardBackward0",
)
fold_matmul = Primitive(
    "fold_matmul",
    _fold_matmul_impl,
    _fold_matmul_rule,
    inputs=("w", "dy"),
    backward_name="ConvolutionBackwardBackward0",
)
windows_matmul.defvjp(
    w=lambda g, x, kernel: windows_dots(g, x, kernel=kernel),
    x=lambda g, w, x_shape, kernel: fold_matmul(w, g, size=tuple(x_shape[2:]), kernel=kernel),
)
windows_dots.defvjp(
    dy=lambda g, x, kernel: windows_matmul(g, x, kernel=kernel),
    x=lambda g, dy, x_shape, kernel: fold_matmul(g, dy, size=tuple(x_shape[2:]), kernel=kernel),
)
fold_matmul.defvjp(
    w=lambda g, dy, kernel: windows_dots(dy, g, kernel=kernel),
    dy=lambda g, w, kernel: windows_matmul(w, g, kernel=kernel),
)
# bilinear: each operand's tangent in its place
windows_matmul.defjvp(
    w=lambda t, x, kernel: windows_matmul(t, x, kernel=kernel),
    x=lambda t, w, kernel: windows_matmul(w, t, kernel=kernel),
)
windows_dots.defjvp(
    dy=lambda t, x, kernel: windows_dots(t, x, kernel=kernel),
    x=lambda t, dy, kernel: windows_dots(dy, t, kernel=kernel),
)
fold_matmul.defjvp(
    w=lambda t, dy, size, kernel: fold_matmul(t, dy, size=size, kernel=kernel),
    dy=lambda t, w, size, kernel: fold_matmul(w, t, size=size, kernel=kernel),
)


# Batched: when only images are, the batch joins their images; per-element
# filters (a batch of models) take the windows as a matrix per element.


def _images_merged(prim, image, *operands, **params):
    """``prim`` on a batch of images (batch, images, ...) as one batch of images."""
    b, n = image.shape[:2]
    out = prim(*operands, reshape(image, shape=(b * n, *image.shape[2:])), **params)
    return reshape(out, shape=(b, n, *out.shape[1:]))


def _windows_rows(x, kernel):
    """(..., images, channels x taps, positions): stride-1 windows of batched images."""
    ones, k = (1,) * len(kernel), len(kernel)
    cols = windows(x, kernel=kernel, stride=ones, dilation=ones)
    counts = tuple(cols.shape[-k:])
    taps = x.shape[-k - 1] * math.prod(kernel)
    return reshape(cols, shape=(*x.shape[: -k - 1], taps, math.prod(counts))), counts


def _batch_windows_matmul(prim, batch, args, batched, params):
    w, x = args
    kernel = params["kernel"]
    if not batched[0]:
        return _images_merged(windows_matmul, x, w, kernel=kernel)
    rows, counts = _windows_rows(_batch_materialized(batch, x, batched[1]), kernel)
    out = matmul(reshape(w, shape=(w.shape[0], 1, *w.shape[1:])), rows)
    return reshape(out, shape=(*out.shape[:-1], *counts))


def _batch_windows_dots(prim, batch, args, batched, params):
    dy, x = args
    k = len(params["kernel"])
    rows, _ = _windows_rows(x, params["kernel"])
    flat = reshape(dy, shape=(*dy.shape[:-k], math.prod(dy.shape[-k:])))
    products = matmul(flat, swap_last(rows))  # (batch, images, out channels, taps)
    return reduce_sum(products, axes=(products.ndim - 3,))


def _batch_fold_matmul(prim, batch, args, batched, params):
    w, dy = args
    kernel, size = params["kernel"], params["size"]
    if not batched[0]:
        return _images_merged(fold_matmul, dy, w, size=size, kernel=kernel)
    dy = _batch_materialized(batch, dy, batched[1])
    flat = reshape(dy, shape=(*dy.shape[:3], math.prod(dy.shape[3:])))
    filters = reshape(swap_last(w), shape=(w.shape[0], 1, w.shape[2], w.shape[1]))
    products = matmul(filters, flat)  # (batch, images, channels x taps, positions)
    channels = w.shape[2] // math.prod(kernel)
    cols = reshape(products, shape=(*dy.shape[:2], channels, *kernel, *dy.shape[3:]))
    ones = (1,) * len(kernel)
    return fold(cols, size=size, kernel=kernel, stride=ones, dilation=ones)


windows_matmul.defbatch(_batch_windows_matmul)
windows_dots.defbatch(_batch_windows_dots)
fold_matmul.defbatch(_batch_fold_matmul)


# Max pooling whose windows tile the input (stride = kernel, no padding):
# each tile's maximum of x is found as PyTorch's max pooling finds it, taps
# in order, a later tap winning when greater or NaN (so the first of equal
# values, the last NaN). ``take_at_tile_max`` reads its source at each tile's
# maximum; ``put_at_tile_max`` writes its values there, zeros elsewhere. In
# source and values each is the other's transpose, hence its VJP; x only
# chooses positions and gets no gradient. The pooling is take_at_tile_max(x, x).


def _tiles(a, kernel):
    """(*lead, *counts, taps): the tiles of a's trailing axes, each flattened."""
    lead, spatial = a.shape[: a.ndim - len(kernel)], a.shape[a.ndim - len(kernel) :]
    counts = tuple(n // k for n, k in zip(spatial, kernel))
    split = a.reshape(lead + tuple(n for pair in zip(counts, kernel) for n in pair))
    first = len(lead)
    order = tuple(range(first)) + tuple(range(first, split.ndim, 2))
    order += tuple(range(first + 1, split.ndim, 2))
    return split.transpose(order).reshape(lead + counts + (math.prod(kernel),))


def _untiles(tiles, shape, kernel):
    """The array of ``shape`` whose ``_tiles`` are ``tiles``."""
    d = len(kernel)
    lead = shape[: len(shape) - d]
    counts = tiles.shape[len(lead) : len(lead) + d]
    split = tiles.reshape(lead + counts + tuple(kernel))
    first = len(lead)
    order = tuple(range(first)) + tuple(a for k in range(d) for a in (first + k, first + d + k))
    return np.ascontiguousarray(split.transpose(order)).reshape(shape)


def _tile_max_taps(x, kernel):
    """Which tap of each tile holds its maximum, as ``_tiles`` numbers them."""
    tiles = _tiles(x, kernel)
    best, taps = tiles[..., 0], np.zeros(tiles.shape[:-1], np.int64)
    for tap in range(1, tiles.shape[-1]):
        value = tiles[..., tap]
        wins = (value > best) | (value != value)
        best, taps = np.where(wins, value, best), np.where(wins, tap, taps)
    return taps[..., None]


def _take_at_tile_max_impl(x, source, kernel):
    taken = np.take_along_axis(_tiles(source, kernel), _tile_max_taps(x, kernel), -1)
    return taken[..., 0]


def _put_at_tile_max_impl(x, values, kernel):
    tiles = np.zeros(_tiles(x, kernel).shape, values.dtype)
    np.put_along_axis(tiles, _tile_max_taps(x, kernel), values[..., None], -1)
    return _untiles(tiles, x.shape, kernel)


def _tiled_shape(name, x, kernel) -> tuple:
    """(*lead, *counts) of x's tiles; x's trailing axes must be whole tiles."""
    spatial = x.shape[x.ndim - len(kernel) :]
    if x.ndim < len(kernel) or any(k < 1 or n % k for n, k in zip(spatial, kernel)):
        raise RuntimeError(f"{name}: tiles of {list(kernel)} do not cover {list(x.shape)}")
    return x.shape[: x.ndim - len(kernel)] + tuple(n // k for n, k in zip(spatial, kernel))


def _take_at_tile_max_rule(x, source, kernel):
    if source.shape != x.shape:
        raise RuntimeError(
            f"take_at_tile_max: source of shape {list(source.shape)} for x of {list(x.shape)}"
        )
    return _tiled_shape("take_at_tile_max", x, kernel), source.dtype


def _put_at_tile_max_rule(x, values, kernel):
    tiled = _tiled_shape("put_at_tile_max", x, kernel)
    if values.shape != tiled:
        raise RuntimeError(
            f"put_at_tile_max: values of shape {list(values.shape)} for tiles {list(tiled)}"
        )
    return x.shape, values.dtype


take_at_tile_max = Primitive(
    "take_at_tile_max",
    _take_at_tile_max_impl,
    _take_at_tile_max_rule,
    inputs=("x", "source"),
    backward_name="MaxPool2DWithIndicesBackward0",
    linear=True,
)
take_at_tile_max.defbatch(batch_stacked)
put_at_tile_max = Primitive(
    "put_at_tile_max",
    _put_at_tile_max_impl,
    _put_at_tile_max_rule,
    inputs=("x", "values"),
    backward_name="MaxPool2DWithIndicesBackwardBackward0",
    linear=True,
)
put_at_tile_max.defbatch(batch_stacked)
take_at_tile_max.defvjp(source=lambda g, x, kernel: put_at_tile_max(x, g, kernel=kernel))
put_at_tile_max.defvjp(values=lambda g, x, kernel: take_at_tile_max(x, g, kernel=kernel))


def _pad_impl(x, widths, value):
    if any(size + lo + hi < 0 for size, (lo, hi) in zip(x.shape, widths)):
        raise ValueError("cropped below no element")  # the shape rule's error, eagerly too
    kept = tuple(slice(max(-lo, 0), size - max(-hi, 0)) for size, (lo, hi) in zip(x.shape, widths))
    grown = [(max(lo, 0), max(hi, 0)) for lo, hi in widths]
    if x.dtype.kind != "f":  # np.pad's casts of the fill value, which may raise
        return np.pad(x[kept], grown, constant_values=value)
    # np.pad's own bookkeeping costs more than the copy for a batch of images
    cropped = x[kept]
    out = np.empty([n + lo + hi for n, (lo, hi) in zip(cropped.shape, grown)], x.dtype)
    out[...] = value
    out[tuple(slice(lo, lo + n) for n, (lo, _) in zip(cropped.shape, grown))] = cropped
    return out


def _pad_rule(x, widths, value):
    if len(widths) != x.ndim:
        raise RuntimeError(f"pad: {len(widths)} pairs of widths for a {x.ndim}-d tensor")
    shape = []
    for dim, (size, (lo, hi)) in enumerate(zip(x.shape, widths)):
        if size + lo + hi < 0:
            raise RuntimeError(
                f"The input size {size}, plus negative padding {lo} and {hi} resulted in a "
                f"negative output size, which is invalid. Check dimension {dim} of your input."
            )
        shape.append(size + lo + hi)
    return tuple(shape), x.dtype


# ``widths`` holds a (before, after) pair for every axis; negative widths crop.
pad = Primitive("pad", _pad_impl, _pad_rule, backward_name="ConstantPadNdBackward0")
pad.defbatch(
    lambda prim, batch, args, batched, params: pad(
        args[0], widths=((0, 0), *params["widths"]), value=params["value"]
    )
)
pad.defvjp(x=lambda g, widths: pad(g, widths=tuple((-lo, -hi) for lo, hi in widths), value=0))
pad.defjvp(x=lambda t, widths: pad(t, widths=widths, value=0))  # the fill is constant


def _bce_impl(x, t):
    # PyTorch's formula: the logarithms clamped at -100, so 0 and 1 give finite losses
    with np.errstate(divide="ignore"):
        return (t - 1) * np.maximum(np.log(1 - x), -100) - t * np.maximum(np.log(x), -100)


# Primitives rather than compositions for PyTorch's gradients: (x - t) / x(1 - x)
# with the denominator kept from 0, where log's clamp would give a zero
# gradient; and sigmoid(x) - t computed as such for the logits' version.
binary_cross_entropy = Primitive(
    "binary_cross_entropy",
    _bce_impl,
    _binary_rule("binary_cross_entropy", require=(dtypes.FLOATING,)),
    inputs=("x", "t"),
    elementwise=True,
)
binary_cross_entropy.defvjp(
    x=lambda g, x, t: g * (x - t) / maximum((1.0 - x) * x, 1e-12),
    t=lambda g, x: -(g * log(x / (1.0 - x))),
)


def _bce_with_logits_impl(x, t, pos_weight):
    log_weight = (pos_weight - 1) * t + 1
    return (1 - t) * x + log_weight * np.logaddexp(0, -x).astype(x.dtype, copy=False)


def _bce_with_logits_rule(x, t, pos_weight):
    dtype = _same_dtype("binary_cross_entropy_with_logits", x, t, pos_weight)
    _require_float("binary_cross_entropy_with_logits", x)
    return broadcast_shapes(x.shape, t.shape, pos_weight.shape), dtype


# (1 - t) x - (1 + (pos_weight - 1) t) log(sigmoid(x)), log(sigmoid(x)) being
# -softplus(-x). The rules are PyTorch's formulas arranged so that a pos_weight
# of 1 (none) adds an exact zero: sigmoid(x) - t, and -x for the target.
binary_cross_entropy_with_logits = Primitive(
    "binary_cross_entropy_with_logits",
    _bce_with_logits_impl,
    _bce_with_logits_rule,
    inputs=("x", "t", "pos_weight"),
    elementwise=True,
)
binary_cross_entropy_with_logits.defvjp(
    x=lambda g, x, t, pos_weight: (
        g * ((sigmoid(x) - t) + (pos_weight - 1.0) * t * (sigmoid(x) - 1.0))
    ),
    t=lambda g, x, pos_weight: g * ((pos_weight - 1.0) * softplus(-x) - x),
    pos_weight=lambda g, x, t: g * t * softplus(-x),
)

# ------------------------------------------------------------------ collectives
#
# A collective combines a value from every process of a group. ``group`` is
# fusegrad.distributed's process group, which does the communicating: to the
# IR it is a parameter with ``rank()``, ``size()`` and the collectives on
# numpy arrays (each returning a new array). The VJP rules communicate too: a
# process's gradient depends on every process's cotangent. Every process
# runs a rule's collectives, also where its own gradient is zero, since the
# others wait for its part.

REDUCTIONS = ("sum", "avg", "product", "min", "max", "band", "bor", "bxor")
_BITWISE = ("band", "bor", "bxor")


def _all_reduce_rule(x, op, group):
    if op not in REDUCTIONS:
        raise ValueError(f"all_reduce: unknown reduction {op!r}; one of {', '.join(REDUCTIONS)}")
    if op == "avg" and not x.dtype.is_floating_point:
        raise TypeError(f"all_reduce: ReduceOp.AVG needs a floating-point tensor, got {x.dtype}")
    if op in _BITWISE and x.dtype.is_floating_point:
        raise TypeError(f"all_reduce: ReduceOp.{op.upper()} needs an integer or bool tensor")
    return x.shape, x.dtype


def _all_reduce_vjp(g, x, out, op, group):
    if op in ("sum", "avg"):  # out is the sum (or mean) of the x of every process
        return all_reduce(g, op=op, group=group)
    total = all_reduce(g, op="sum", group=group)  # every process's out depends on this x
    if op == "product":
        return total * _product_of_the_others(x, group)
    # min and max: split evenly between the processes that tie for the extremum, as amax does
    hit = x == out
    ties = all_reduce(convert(hit, dtype=x.dtype), op="sum", group=group)
    return where(hit, total / ties, 0.0)


def _product_of_the_others(x, group):
    """The product of the other processes' x (no division: exact at zeros)."""
    everyone = all_gather(x, group=group)
    rank = group.rank()
    before = index(everyone, spec=(("slice", None, rank, None),))
    after = index(everyone, spec=(("slice", rank + 1, None, None),))
    return reduce_prod(concatenate(before, after, axis=0), axes=(0,))


def _broadcast_rule(x, src, group):
    if not 0 <= src < group.size():
        raise ValueError(f"broadcast: src {src} is no rank of a group of {group.size()} processes")
    return x.shape, x.dtype


def _broadcast_vjp(g, src, group):
    total = all_reduce(g, op="sum", group=group)  # every process's out is src's x
    return total if group.rank() == src else None  # the others' x reached no output


# Elementwise across processes, but not locally: each runs between the kernels.
all_reduce = Primitive(
    "all_reduce",
    lambda x, op, group: group.all_reduce(x, op),
    _all_reduce_rule,
    collective=True,
)
all_reduce.defbatch(batch_broadcasting)
all_reduce.defvjp(x=_all_reduce_vjp)

broadcast = Primitive(
    "broadcast",
    lambda x, src, group: group.broadcast(x, src),
    _broadcast_rule,
    collective=True,
    linear=True,
)
broadcast.defbatch(batch_broadcasting)
broadcast.defvjp(x=_broadcast_vjp)

# Every process's x, stacked along a new first axis in rank order.
all_gather = Primitive(
    "all_gather",
    lambda x, group: group.all_gather(x),
    lambda x, group: ((group.size(), *x.shape), x.dtype),
    collective=True,
    linear=True,
)
all_gather.defvjp(
    x=lambda g, group: index(all_reduce(g, op="sum", group=group), spec=(("int", group.rank()),))
)

PRIMITIVES = {p.name: p for p in globals().values() if isinstance(p, Primitive)}

# Primitives whose result holds only values of their first operand: what
# a float32 of bfloat16 values stays through (for ``matmul[operands=bf16]``).
MOVING = (reshape, transpose, broadcast_to, index, diagonal)
