"""torch.func (fusegrad.func): each transform on each example function,
eagerly and under jit in either order, against finite differences; then
nesting, pytrees, modules' functional calls and the errors PyTorch raises."""

import collections

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.as_torch
import fusegrad.utils._pytree as pytree
from fusegrad.func import (
    functional_call,
    grad,
    grad_and_value,
    hessian,
    jacrev,
    stack_module_state,
    vjp,
)

# name -> (a function of tensors returning a tensor, its arguments' shapes)
FUNCTIONS = {
    "cubic": (lambda x: x**3 - 2 * x, [(3,)]),
    "tanh_layer": (lambda x, w: fg.tanh(x @ w), [(2, 3), (3, 2)]),
    "log_softmax": (lambda x: fg.log_softmax(x, -1), [(2, 3)]),
    "sin_times_exp": (lambda x, y: fg.sin(x) * fg.exp(y), [(3,), (3,)]),
    "norm_of_outer": (lambda x, y: fg.outer(x, y).norm().reshape(1), [(2,), (3,)]),
}


def _arguments(shapes):
    rng = np.random.default_rng(len(shapes))
    return [fg.tensor(rng.uniform(-1, 1, shape)) for shape in shapes]  # float64


def _numeric_jacobian(fn, args, j, h=1e-6):
    """d fn(*args) / d args[j] by central differences, shaped out.shape + arg.shape."""
    base = [a.numpy() for a in args]
    out_shape = fn(*args).shape
    columns = []
    for index in np.ndindex(*base[j].shape):
        shifted = []
        for sign in (1, -1):
            values = [b.copy() for b in base]
            values[j][index] += sign * h
            shifted.append(fn(*[fg.tensor(v) for v in values]).numpy())
        columns.append((shifted[0] - shifted[1]) / (2 * h))
    jac = np.stack(columns, axis=-1) if columns else np.zeros((*out_shape, 0))
    return jac.reshape(*out_shape, *base[j].shape)


def _summed(fn):
    return lambda *args: fn(*args).sum()


def _all(args):
    return tuple(range(len(args)))


def _expected_gradients(fn, args):
    return [_numeric_jacobian(_summed(fn), args, j) for j in range(len(args))]


def _expected_hessian(fn, args):
    """Finite differences of the gradient eager autograd computes."""

    def gradient(i):
        def of(*xs):
            xs = [x.detach().requires_grad_() for x in xs]
            return fg.autograd.grad(_summed(fn)(*xs), xs[i], allow_unused=True)[0]

        return of

    return [
        [_numeric_jacobian(gradient(i), args, j) for j in range(len(args))]
        for i in range(len(args))
    ]


# transform name -> (the transformed function of the arguments, the expected values)
TRANSFORMS = {
    "grad": (
        lambda fn, args: grad(_summed(fn), argnums=_all(args)),
        _expected_gradients,
    ),
    "grad_and_value": (
        lambda fn, args: grad_and_value(_summed(fn), argnums=_all(args)),
        lambda fn, args: (_expected_gradients(fn, args), fn(*args).sum().numpy()),
    ),
    "vjp": (
        lambda fn, args: lambda *xs: vjp(fn, *xs)[1](fg.ones_like(fn(*xs))),
        _expected_gradients,
    ),
    "jacrev": (
        lambda fn, args: jacrev(fn, argnums=_all(args)),
        lambda fn, args: [_numeric_jacobian(fn, args, j) for j in range(len(args))],
    ),
    "hessian": (
        lambda fn, args: hessian(_summed(fn), argnums=_all(args)),
        _expected_hessian,
    ),
}

# how the transformed function runs: eagerly, compiled, or on a compiled function
MODES = {
    "eager": lambda transform, fn, args: transform(fn, args),
    "jit_of_transform": lambda transform, fn, args: fg.jit(transform(fn, args)),
    "transform_of_jit": lambda transform, fn, args: transform(fg.jit(fn), args),
}


def _assert_close(got, expected):
    got_leaves = pytree.tree_leaves(got)
    expected_leaves = pytree.tree_leaves(expected)
    assert len(got_leaves) == len(expected_leaves)
    for g, e in zip(got_leaves, expected_leaves):
        assert isinstance(g, fg.Tensor) and not g.requires_grad
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("function", FUNCTIONS)
def test_a_transform_matches_finite_differences(function, transform, mode):
    fn, shapes = FUNCTIONS[function]
    make, expected = TRANSFORMS[transform]
    args = _arguments(shapes)
    transformed = MODES[mode](make, fn, args)
    want = expected(fn, args)
    for _ in range(2):  # a compiled function's second call runs its program
        _assert_close(transformed(*args), want)


def test_a_transform_inside_another_takes_its_own_variable():
    """d/dx of (d/dy x * y at y = x) is d/dx x = 1, not 2: the inner grad
    differentiates with respect to its own y, not the outer x."""
    x = fg.tensor([1.0, 2.0])
    outer = grad(lambda x: grad(lambda y: (x * y).sum())(x).sum())
    np.testing.assert_array_equal(outer(x).numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(fg.jit(outer)(x).numpy(), [1.0, 1.0])
    jax_style = fg.grad(lambda x: fg.grad(lambda y: (x * y).sum())(x).sum())
    np.testing.assert_array_equal(jax_style(x).numpy(), [1.0, 1.0])


def test_grad_leaks_nothing_into_leaves_and_is_differentiable_only_from_outside():
    w = fg.tensor([3.0, 4.0], requires_grad=True)
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    plain = grad(lambda x: (x**3).sum())(fg.tensor([1.0, 2.0]))
    assert not plain.requires_grad
    through_x = grad(lambda x: (x**3 * w).sum())(x)
    assert through_x.requires_grad and x.grad is None and w.grad is None
    through_x.sum().backward()  # d/dx and d/dw of sum(3 x^2 w)
    np.testing.assert_allclose(x.grad.numpy(), [18.0, 48.0])
    np.testing.assert_allclose(w.grad.numpy(), [3.0, 12.0])
    closure = grad(lambda y: (y * w).sum())(fg.tensor([1.0, 2.0]))
    assert closure.requires_grad  # through w
    with fg.no_grad():
        assert not grad(lambda x: (x * w).sum())(x).requires_grad


def test_grad_of_grad_of_grad():
    third = grad(grad(grad(lambda x: fg.sin(x) * x)))
    x = fg.tensor(0.5, dtype=fg.float64)
    expected = -3 * np.sin(0.5) - 0.5 * np.cos(0.5)
    for fn in (third, fg.jit(third)):
        np.testing.assert_allclose(fn(x).item(), expected, rtol=1e-12)


def test_has_aux_returns_the_aux_detached():
    def f(x):
        y = x * 2
        return (y**2).sum(), {"y": y}

    x = fg.tensor([1.0, 2.0])
    g, aux = grad(f, has_aux=True)(x)
    assert g.tolist() == [8.0, 16.0] and aux["y"].tolist() == [2.0, 4.0]
    assert not aux["y"].requires_grad
    g, (value, aux) = grad_and_value(f, has_aux=True)(x)
    assert value.item() == 20.0 and aux["y"].tolist() == [2.0, 4.0]
    _, vjp_fn, aux = vjp(lambda x: (x * 3, [x + 1]), x, has_aux=True)
    assert vjp_fn(fg.ones(2))[0].tolist() == [3.0, 3.0] and aux[0].tolist() == [2.0, 3.0]
    jac, aux = jacrev(lambda x: (x * 3, x.sum()), has_aux=True)(x)
    assert jac.tolist() == [[3.0, 0.0], [0.0, 3.0]] and aux.item() == 3.0


def test_pytrees_of_arguments_and_outputs():
    x, y = fg.tensor([1.0, 2.0]), fg.tensor([3.0, 4.0, 5.0])
    g = grad(lambda p: (p["a"] * p["b"][0]).sum())({"a": x, "b": (x * 0 + 3,)})
    assert g["a"].tolist() == [3.0, 3.0] and g["b"][0].tolist() == [1.0, 2.0]
    jac = jacrev(lambda x, y: {"outer": fg.outer(x, y), "x": [x * 2]}, argnums=(0, 1))(x, y)
    assert jac["outer"][0].shape == (2, 3, 2) and jac["outer"][1].shape == (2, 3, 3)
    assert jac["x"][0][0].tolist() == [[2.0, 0.0], [0.0, 2.0]]
    assert not jac["x"][0][1].numpy().any()  # x * 2 does not depend on y
    _, vjp_fn = vjp(lambda p: {"s": p[0] * p[1]}, [x, x + 1])
    (cotangent_grads,) = vjp_fn({"s": fg.ones(2)})
    assert isinstance(cotangent_grads, list) and cotangent_grads[0].tolist() == [2.0, 3.0]


def test_vjp_fn_runs_again_and_checks_its_cotangents():
    x = fg.tensor([1.0, 2.0])
    _, vjp_fn = vjp(lambda x, y: {"p": x * y, "q": (x + y,)}, x, fg.tensor([3.0, 4.0]))
    cotangents = {"p": fg.ones(2), "q": (fg.ones(2),)}
    for _ in range(3):
        gx, gy = vjp_fn(cotangents)
        assert gx.tolist() == [4.0, 5.0] and gy.tolist() == [2.0, 3.0]
    with pytest.raises(RuntimeError) as error:
        vjp_fn({"p": fg.ones(2)})
    assert str(error.value) == (
        "Expected pytree structure of cotangents to be the same as pytree structure of outputs "
        "to the function. cotangents: {'p': *}, primal output: {'p': *, 'q': (*,)}"
    )
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        vjp_fn({"p": fg.ones(3), "q": (fg.ones(2),)})
    (zero,) = vjp(lambda x: fg.ones(2), x)[1](fg.ones(2))
    assert zero.tolist() == [0.0, 0.0]


def test_jacrev_in_chunks_gives_the_same_jacobian():
    f = FUNCTIONS["tanh_layer"][0]
    args = _arguments([(2, 3), (3, 2)])
    whole = jacrev(f, argnums=(0, 1))(*args)
    for chunk_size in (1, 3, 100):
        chunked = jacrev(f, argnums=(0, 1), chunk_size=chunk_size)(*args)
        for a, b in zip(chunked, whole):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_jacrev_of_empty_tensors():
    x = fg.tensor([1.0, 2.0])
    assert jacrev(lambda x: x[:0])(x).shape == (0, 2)
    assert jacrev(lambda x: x)(fg.zeros(0)).shape == (0, 0)


def test_hessian_agrees_with_autograd_functional():
    def f(a, b):
        return (a**2 * b.sum() + fg.sin(a)).sum()

    a, b = _arguments([(2,), (3,)])
    ours = hessian(f, argnums=(0, 1))(a, b)
    theirs = fg.autograd.functional.hessian(f, (a, b))
    for row_ours, row_theirs in zip(ours, theirs):
        for x, y in zip(row_ours, row_theirs):
            np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-12)


def test_the_jax_style_grad_shares_the_implementation():
    x = fg.tensor([1.0, 2.0])
    value, g = fg.value_and_grad(lambda p: (p["x"] ** 2).sum())({"x": x})
    assert value.item() == 5.0 and g["x"].tolist() == [2.0, 4.0]
    assert fg.grad(lambda x: (x**2).sum().reshape(1, 1))(x).tolist() == [2.0, 4.0]


def _raises(fn, kind, message):
    with pytest.raises(kind) as error:
        fn()
    assert str(error.value) == message


ONE = fg.tensor([1.0, 2.0])
# what PyTorch 2.13 raises, word for word
ERRORS = {
    "non_scalar_output": (
        lambda: grad(lambda x: x * 2)(ONE),
        RuntimeError,
        "grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor "
        "with 1 dims. Maybe you wanted to use the vjp or jacrev APIs instead?",
    ),
    "non_tensor_output": (
        lambda: grad(lambda x: 3.0)(ONE),
        RuntimeError,
        "grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got <class 'float'>",
    ),
    "aux_not_a_pair": (
        lambda: grad(lambda x: x.sum(), has_aux=True)(ONE),
        RuntimeError,
        "grad_and_value(f)(*args): output of function f should be a tuple: (output, aux) if "
        "has_aux is True",
    ),
    "aux_not_tensors": (
        lambda: grad(lambda x: (x.sum(), 2), has_aux=True)(ONE),
        RuntimeError,
        "Expected tensors, got unsupported type <class 'int'>",
    ),
    "argument_not_a_tensor": (
        lambda: grad(lambda x: x.sum())(3.0),
        ValueError,
        "Thing passed to transform API must be Tensor, got <class 'float'>",
    ),
    "integer_argument": (
        lambda: grad(lambda x: x.sum())(fg.tensor([1, 2])),
        RuntimeError,
        "only Tensors of floating point dtype can require gradients",
    ),
    "argnum_out_of_range": (
        lambda: grad(lambda x: x.sum(), argnums=2)(ONE),
        RuntimeError,
        "Got argnum=2, but only 1 positional inputs",
    ),
    "empty_argnums": (
        lambda: grad(lambda x: x.sum(), argnums=())(ONE),
        RuntimeError,
        "argnums must be non-empty",
    ),
    "float_argnums": (
        lambda: grad(lambda x: x.sum(), argnums=0.5)(ONE),
        RuntimeError,
        "argnums must be int or Tuple[int, ...], got: <class 'float'>",
    ),
    "repeated_argnums": (
        lambda: jacrev(lambda x: x, argnums=(0, 0))(ONE),
        RuntimeError,
        "argnums elements must be unique, got (0, 0)",
    ),
    "vjp_non_tensor_output": (
        lambda: vjp(lambda x: (x, 3.0), ONE),
        RuntimeError,
        "vjp(f, *primals): expected f(*primals) to return only tensors, got unsupported type "
        "<class 'float'>",
    ),
    "vjp_aux_not_a_pair": (
        lambda: vjp(lambda x: x, ONE, has_aux=True),
        RuntimeError,
        "vjp(f, *primals): output of function f should be a tuple: (output, aux) if has_aux is "
        "True",
    ),
    "chunk_size_zero": (
        lambda: jacrev(lambda x: x, chunk_size=0),
        ValueError,
        "jacrev: `chunk_size` should be greater than 0.",
    ),
}


@pytest.mark.parametrize("case", ERRORS)
def test_errors_are_pytorchs(case):
    _raises(*ERRORS[case])


# ------------------------------------------------------------ functional_call


class _Tied(fg.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = fg.nn.Linear(2, 2, bias=False)
        self.b = fg.nn.Linear(2, 2, bias=False)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.a(x) + self.b(x)


def test_functional_call_swaps_parameters_and_restores_them():
    layer = fg.nn.Linear(2, 2)
    weight, bias = layer.weight, layer.bias
    x = fg.ones(1, 2)
    given = {"weight": fg.eye(2), "bias": fg.zeros(2)}
    for args in (x, (x,)):
        assert functional_call(layer, given, args).tolist() == [[1.0, 1.0]]
    assert functional_call(layer, ({"weight": fg.eye(2)}, {"bias": fg.ones(2)}), x).tolist() == [
        [2.0, 2.0]
    ]
    assert functional_call(layer, {}, (), {"input": x}).shape == (1, 2)
    assert layer.weight is weight and layer.bias is bias

    def fails(x):
        raise ValueError("boom")

    layer.forward = fails
    with pytest.raises(ValueError, match="boom"):
        functional_call(layer, given, x)
    del layer.forward
    assert layer.weight is weight and layer.bias is bias


def test_functional_call_sets_unexpected_names_for_the_call_only():
    layer = fg.nn.Linear(2, 2)
    seen = []
    layer.forward = lambda x: seen.append(layer.extra) or x
    functional_call(layer, {"extra": fg.ones(1)}, fg.ones(2))
    assert seen[0].tolist() == [1.0] and not hasattr(layer, "extra")


def test_functional_call_ties_weights():
    model = _Tied()
    x = fg.ones(1, 2)
    assert functional_call(model, {"a.weight": fg.eye(2)}, x).tolist() == [[2.0, 2.0]]
    assert functional_call(model, {"b.weight": fg.eye(2)}, x).tolist() == [[2.0, 2.0]]
    untied = functional_call(model, {"a.weight": fg.eye(2)}, x, tie_weights=False)
    assert untied.tolist() == (x + x @ model.a.weight.t()).tolist()
    eye = fg.eye(2)
    assert functional_call(model, {"a.weight": eye, "b.weight": eye}, x).tolist() == [[2.0, 2.0]]
    _raises(
        lambda: functional_call(model, {"a.weight": fg.eye(2), "b.weight": fg.ones(2, 2)}, x),
        ValueError,
        "functional_call got multiple values for keys ['a.weight', 'b.weight'], which are tied. "
        "Consider using tie_weights=False",
    )


def test_functional_call_errors():
    layer = fg.nn.Linear(2, 2)
    layer.register_buffer("b", fg.zeros(2))
    x = fg.ones(1, 2)
    _raises(
        lambda: functional_call(layer, {"weight": fg.eye(2), "foo": fg.ones(2)}, x, strict=True),
        RuntimeError,
        "Error(s) in reparametrizing for Linear:\n\tUnexpected key(s): 'foo'.\n\t"
        "Missing key(s): 'b', 'bias'.",
    )
    _raises(
        lambda: functional_call(layer, ({"weight": fg.eye(2)}, {"weight": fg.eye(2)}), x),
        ValueError,
        "['weight'] appeared in multiple dictionaries; behavior of functional call is ambiguous",
    )
    _raises(
        lambda: functional_call(layer, 3, x),
        ValueError,
        "Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
        "<class 'int'>",
    )
    _raises(
        lambda: functional_call(layer, {"weight": 3}, x),
        TypeError,
        "3 is not an instance of torch.Tensor",
    )
    _raises(
        lambda: functional_call(layer, {"x.y": fg.ones(2)}, x),
        AttributeError,
        "Linear has no attribute `x`",
    )


def test_functional_call_updates_the_given_buffers_not_the_modules():
    norm = fg.nn.BatchNorm1d(2)
    running = fg.zeros(2)
    functional_call(norm, {"running_mean": running}, fg.tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert running.tolist() != [0.0, 0.0] and norm.running_mean.tolist() == [0.0, 0.0]


def test_gradients_of_a_functional_call_eagerly_and_compiled():
    model = fg.nn.Sequential(fg.nn.Linear(3, 4), fg.nn.Tanh(), fg.nn.Linear(4, 1)).double()
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = fg.tensor(np.random.default_rng(0).standard_normal((5, 3)))

    def loss(params, x):
        return functional_call(model, params, (x,)).pow(2).sum()

    model.zero_grad()
    loss(dict(model.named_parameters()), x).backward()
    for fn in (grad(loss), fg.jit(grad(loss))):
        for _ in range(2):
            grads = fn(params, x)
            for name, p in model.named_parameters():
                np.testing.assert_allclose(grads[name].numpy(), p.grad.numpy(), rtol=1e-12)
                assert p is model.get_parameter(name)


def test_stack_module_state_stacks_leaves_and_runs_an_ensemble():
    fg.manual_seed(0)
    models = [fg.nn.Sequential(fg.nn.Linear(2, 3), fg.nn.BatchNorm1d(3)).eval() for _ in range(3)]
    params, buffers = stack_module_state(models)
    assert params["0.weight"].shape == (3, 3, 2) and buffers["1.running_mean"].shape == (3, 3)
    assert all(p.is_leaf and p.requires_grad for p in params.values())
    assert buffers["1.num_batches_tracked"].dtype is fg.int64
    x = fg.randn(4, 2)
    with fg.no_grad():
        for i, model in enumerate(models):
            state = {k: v[i] for k, v in {**params, **buffers}.items()}
            got = functional_call(models[0], state, x)
            np.testing.assert_array_equal(got.numpy(), model(x).numpy())
    frozen = [fg.nn.Linear(2, 2) for _ in range(2)]
    for m in frozen:
        m.weight.requires_grad_(False)
    stacked, _ = stack_module_state(frozen)
    assert not stacked["weight"].requires_grad and stacked["bias"].requires_grad


def test_stack_module_state_errors():
    _raises(
        lambda: stack_module_state([]),
        RuntimeError,
        "stack_module_state: Expected at least one model, got 0.",
    )
    _raises(
        lambda: stack_module_state([fg.nn.Linear(2, 2), fg.nn.Linear(2, 2).eval()]),
        RuntimeError,
        "stack_module_state: Expected all models to have the same training/eval mode.",
    )
    _raises(
        lambda: stack_module_state([fg.nn.Linear(2, 2), fg.nn.Tanh()]),
        RuntimeError,
        "stack_module_state: Expected all models to be of the same class.",
    )
    mixed = [fg.nn.Linear(2, 2), fg.nn.Linear(2, 2)]
    mixed[1].weight.requires_grad_(False)
    _raises(
        lambda: stack_module_state(mixed),
        RuntimeError,
        "Expected weight from each model to have the same .requires_grad",
    )


# ------------------------------------------------------------------ pytrees

Point = collections.namedtuple("Point", "x y")


@pytest.mark.parametrize(
    "tree",
    [
        {"b": (1, [2, None]), "a": 3},
        Point(1, (2, 3)),
        collections.OrderedDict(z=1, a=[2]),
        collections.defaultdict(list, k=[1, 2]),
        collections.deque([1, (2,)], maxlen=4),
        fg.Size([2, 3]),
        5,
        [],
    ],
)
def test_a_pytree_flattens_and_comes_back(tree):
    leaves, spec = pytree.tree_flatten(tree)
    assert spec.num_leaves == len(leaves)
    again = pytree.tree_unflatten(leaves, spec)
    assert again == tree and type(again) is type(tree)
    assert pytree.tree_structure(again) == spec


def test_pytree_functions():
    tree = {"b": (1, [2, None]), "a": 3}
    assert pytree.tree_leaves(tree) == [1, 2, None, 3]  # None is a leaf, as in PyTorch 2.13
    assert pytree.treespec_pprint(pytree.tree_structure(tree)) == "{'b': (*, [*, *]), 'a': *}"
    assert pytree.tree_map(lambda a, b: a + b, (1, 2), (3, 4)) == (4, 6)
    assert pytree.tree_map_only(int, lambda a: a * 10, (1, "x", 2.0)) == (10, "x", 2.0)
    assert pytree.tree_map_only((int, float), lambda a: a * 10, (1, 2.0)) == (10, 20.0)
    assert pytree.tree_leaves([1, [2]], is_leaf=lambda n: n == [2]) == [1, [2]]
    assert pytree.tree_structure((1,)) != pytree.tree_structure([1])
    assert pytree.tree_structure({"a": 1, "b": 2}) != pytree.tree_structure({"b": 1, "a": 2})
    _raises(
        lambda: pytree.tree_map(lambda a, b: a + b, (1, 2), (3, 4, 5)),
        ValueError,
        "Node arity mismatch; expected 2, but got 3.",
    )
    with pytest.raises(ValueError, match="`leaves` has length 1 but the spec refers to a pytree"):
        pytree.tree_unflatten([1], pytree.tree_structure((1, [2])))


def test_a_registered_node_type_flattens():
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    pytree.register_pytree_node(Pair, lambda p: ([p.a, p.b], None), lambda c, _: Pair(*c))
    try:
        doubled = pytree.tree_map(lambda v: v * 2, Pair(1, (2,)))
        assert (doubled.a, doubled.b) == (2, (4,))
    finally:
        del pytree.SUPPORTED_NODES[Pair]


def test_torch_func_and_pytree_are_fusegrads():
    with fusegrad.as_torch.enabled():
        import torch.func
        import torch.utils._pytree

        assert torch.func.grad is grad and torch.utils._pytree.tree_map is pytree.tree_map
