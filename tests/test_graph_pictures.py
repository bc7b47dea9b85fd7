"""Backward graphs as graph drawing tools read them: torchviz's ``make_dot``
walks ``grad_fn``, ``next_functions``, ``AccumulateGrad.variable`` and the
nodes' ``_saved_<name>`` attributes. The expected walks were made once with
PyTorch 2.13 (the same code, ``import torch``)."""

import importlib.util
import math
import re
import shutil
import warnings
from collections import Counter

import pytest

import fusegrad as fg
import fusegrad.as_torch
import fusegrad.nn.functional as F
from fusegrad import nn

SAVED_PREFIX = "_saved_"
ADDMM = (
    "alpha",
    "beta",
    "mat1",
    "mat1_sym_sizes",
    "mat1_sym_strides",
    "mat2",
    "mat2_sym_sizes",
    "mat2_sym_strides",
)
LAYER_NORM = ("bias", "input", "normalized_shape", "result1", "result2", "weight")


def walk(tensor) -> list:
    """(node name, saved attribute names, names of next nodes) of each node
    reached from ``tensor``, in torchviz's order (depth first)."""
    seen, nodes = set(), []

    def visit(fn):
        if fn in seen:
            return
        seen.add(fn)
        saved = tuple(sorted(a[len(SAVED_PREFIX) :] for a in dir(fn) if a.startswith(SAVED_PREFIX)))
        following = tuple(type(n).__name__ for n, _ in fn.next_functions if n is not None)
        nodes.append((type(fn).__name__, saved, following))
        for n, _ in fn.next_functions:
            if n is not None:
                visit(n)

    visit(tensor.grad_fn)
    return nodes


def mlp_loss():
    fg.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    x, target = fg.randn(5, 4), fg.tensor([0, 2, 1, 0, 1])
    return mlp, F.nll_loss(F.log_softmax(mlp(x), -1), target)


def test_mlp_graph_as_pytorch_draws_it():
    _, loss = mlp_loss()
    assert walk(loss) == [
        (
            "NllLossBackward0",
            ("ignore_index", "reduction", "self", "target", "total_weight", "weight"),
            ("LogSoftmaxBackward0",),
        ),
        ("LogSoftmaxBackward0", ("dim", "result"), ("AddmmBackward0",)),
        ("AddmmBackward0", ADDMM, ("AccumulateGrad", "ReluBackward0", "TBackward0")),
        ("AccumulateGrad", (), ()),
        ("ReluBackward0", ("result",), ("AddmmBackward0",)),
        ("AddmmBackward0", ADDMM, ("AccumulateGrad", "TBackward0")),
        ("AccumulateGrad", (), ()),
        ("TBackward0", (), ("AccumulateGrad",)),
        ("AccumulateGrad", (), ()),
        ("TBackward0", (), ("AccumulateGrad",)),
        ("AccumulateGrad", (), ()),
    ]


def test_cross_entropy_is_log_softmax_then_nll_loss_as_in_pytorch():
    """With class indices PyTorch's graph has both nodes, the loss's on the
    log-probabilities alone (a class index has no gradient)."""
    x = fg.randn(5, 3, requires_grad=True)
    loss = F.cross_entropy(x, fg.tensor([0, 2, 1, 0, 1]))
    assert [(name, following) for name, _, following in walk(loss)] == [
        ("NllLossBackward0", ("LogSoftmaxBackward0",)),
        ("LogSoftmaxBackward0", ("AccumulateGrad",)),
        ("AccumulateGrad", ()),
    ]
    assert len(loss.grad_fn.next_functions) == 1


def test_saved_values_mean_what_pytorchs_do():
    mlp, loss = mlp_loss()
    nll = loss.grad_fn
    assert (nll._saved_reduction, nll._saved_ignore_index, nll._saved_weight) == (1, -100, None)
    assert nll._saved_total_weight.item() == 5.0
    assert nll._saved_target.tolist() == [0, 2, 1, 0, 1]
    log_softmax = nll.next_functions[0][0]
    assert log_softmax._saved_dim == -1  # PyTorch shows -1 as 2**64 - 1
    assert fg.allclose(log_softmax._saved_result, nll._saved_self)
    addmm = log_softmax.next_functions[0][0]
    assert (addmm._saved_alpha, addmm._saved_beta) == (1, 1)
    assert addmm._saved_mat1_sym_sizes == (5, 8) and addmm._saved_mat2_sym_sizes == (8, 3)
    assert addmm._saved_mat2_sym_strides == (1, 8)  # the weight, transposed
    relu = addmm.next_functions[1][0]
    assert relu._saved_result is not None and addmm._saved_mat1.shape == (5, 8)
    leaf = addmm.next_functions[0][0]
    assert leaf.variable is mlp[2].bias
    assert leaf.metadata == {} and leaf.metadata is leaf.metadata


def test_elementwise_and_shape_nodes():
    x = fg.randn(3, 4, requires_grad=True)
    mul = (x * x).grad_fn
    assert mul._saved_self is x and mul._saved_other is x
    pow_node = (x**2).grad_fn
    assert pow_node._saved_exponent == 2 and pow_node._saved_self is x
    total = x.sum(1).grad_fn
    assert (total._saved_dim, total._saved_keepdim, total._saved_self_sym_sizes) == (
        (1,),
        False,
        (3, 4),
    )
    transpose = x.transpose(0, 1).grad_fn
    assert (transpose._saved_dim0, transpose._saved_dim1) == (0, 1)
    assert x.view(12).grad_fn._saved_self_sym_sizes == (3, 4)
    assert F.gelu(x, approximate="tanh").grad_fn._saved_approximate == "tanh"
    mean = x.mean(1).grad_fn
    assert (mean._saved_dim, mean._saved_self_sym_numel) == ((1,), 12)


def test_saved_values_are_gone_after_backward():
    x = fg.randn(3, requires_grad=True)
    y = (x * x).sum()
    mul = y.grad_fn.next_functions[0][0]
    y.backward()
    with pytest.raises(RuntimeError, match="freed"):
        mul._saved_self  # noqa: B018


class Block(nn.Module):
    """A GPT-mini transformer block (tests/programs/gpt_mini.py's, smaller)."""

    def __init__(self, channels=8, heads=2):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(channels), nn.LayerNorm(channels)
        self.attn = nn.Linear(channels, 3 * channels)
        self.proj = nn.Linear(channels, channels)
        self.fc = nn.Linear(channels, 4 * channels)
        self.out = nn.Linear(4 * channels, channels)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.attn(self.ln1(x)).split(C, dim=2)
        q, k, v = (z.view(B, T, self.heads, C // self.heads).transpose(1, 2) for z in (q, k, v))
        att = F.softmax((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.heads)), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


# PyTorch records a product of stacked matrices as the steps of its bmm
# (expand, view, bmm, unsafe view) and a split as one node of several
# outputs; fusegrad records one node per product (UnsafeViewBackward0) and
# per part. The walks are compared without those nodes.
RECORDED_OTHERWISE = {
    "UnsafeViewBackward0",
    "BmmBackward0",
    "ExpandBackward0",
    "CloneBackward0",
    "SplitBackward0",
}

VIEW = ("self_sym_sizes",)
TRANSPOSE = ("dim0", "dim1")
BLOCK_NODES = {
    ("AccumulateGrad", (), ()): 13,
    ("AddBackward0", ("alpha",), ("AddBackward0", "ViewBackward0")): 1,
    ("AddBackward0", ("alpha",), ("EmbeddingBackward0", "ViewBackward0")): 1,
    ("AddmmBackward0", ADDMM, ("AccumulateGrad", "ViewBackward0", "TBackward0")): 4,
    (
        "EmbeddingBackward0",
        ("indices", "padding_idx", "scale_grad_by_freq", "sparse", "weight_sym_argsize_0"),
        ("AccumulateGrad",),
    ): 1,
    ("GeluBackward0", ("approximate", "self"), ("ViewBackward0",)): 1,
    ("MeanBackward0", ("self_sym_numel", "self_sym_sizes"), ("AddBackward0",)): 1,
    ("MulBackward0", ("other", "self"), ()): 1,
    (
        "NativeLayerNormBackward0",
        LAYER_NORM,
        ("AddBackward0", "AccumulateGrad", "AccumulateGrad"),
    ): 1,
    (
        "NativeLayerNormBackward0",
        LAYER_NORM,
        ("EmbeddingBackward0", "AccumulateGrad", "AccumulateGrad"),
    ): 1,
    ("SoftmaxBackward0", ("dim", "result"), ("MulBackward0",)): 1,
    ("TBackward0", (), ("AccumulateGrad",)): 4,
    ("TransposeBackward0", TRANSPOSE, ()): 1,
    ("TransposeBackward0", TRANSPOSE, ("TransposeBackward0",)): 1,
    ("TransposeBackward0", TRANSPOSE, ("ViewBackward0",)): 3,
    ("ViewBackward0", VIEW, ()): 4,
    ("ViewBackward0", VIEW, ("AddmmBackward0",)): 4,
    ("ViewBackward0", VIEW, ("GeluBackward0",)): 1,
    ("ViewBackward0", VIEW, ("NativeLayerNormBackward0",)): 2,
    ("ViewBackward0", VIEW, ("ViewBackward0",)): 1,
}


def test_gpt_block_graph_as_pytorch_draws_it():
    fg.manual_seed(0)
    embedding = nn.Embedding(11, 8)
    y = Block()(embedding(fg.tensor([[1, 2, 3], [4, 5, 6]]))).mean()
    nodes = Counter(
        (name, saved, tuple(n for n in following if n not in RECORDED_OTHERWISE))
        for name, saved, following in walk(y)
        if name not in RECORDED_OTHERWISE
    )
    assert nodes == BLOCK_NODES


def test_compiled_call_is_one_node_on_the_leaves():
    fg.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    step = fg.jit(lambda x: mlp(x).tanh().sum())
    y = step(fg.randn(5, 4))
    node = y.grad_fn
    assert type(node).__name__ == "CompiledFunctionBackward"
    leaves = {id(n.variable) for n, _ in node.next_functions}
    assert leaves == {id(p) for p in mlp.parameters()}


@pytest.mark.skipif(
    importlib.util.find_spec("torchviz") is None, reason="torchviz is not installed"
)
def test_torchviz_draws_fusegrad_graphs():
    with fusegrad.as_torch.enabled():
        import torchviz
    mlp, loss = mlp_loss()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torchviz's warning about PyTorch versions before 1.9
        dot = torchviz.make_dot(
            loss, params=dict(mlp.named_parameters()), show_attrs=True, show_saved=True
        )
    source = dot.source
    for text in ("NllLossBackward0", "AddmmBackward0", "0.weight", "mat1_sym_sizes", "result"):
        assert text in source
    assert source.count("AccumulateGrad") == 4


# ------------------------------------------------- a compiled program's picture


def mlp_step_lowered():
    fg.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    step = fg.jit(lambda x, t: F.cross_entropy(mlp(x), t))
    return step.lower(fg.randn(5, 4), fg.tensor([0, 1, 2, 0, 1]))


def test_program_picture_is_well_formed_dot():
    lowered = mlp_step_lowered()
    text = lowered.graph()
    assert text.startswith("digraph program {") and text.rstrip().endswith("}")
    assert text.count("{") == text.count("}")
    declared = set(re.findall(r"^\s*(\w+) \[label=", text, re.M))
    edges = re.findall(r"^\s*(\w+) -> (\w+)", text, re.M)
    assert edges and all(a in declared and b in declared for a, b in edges)
    clusters = re.findall(r"subgraph cluster_\w+_kernel\d+ \{", text)
    assert len(clusters) == len(lowered.kernels)
    for kernel in lowered.kernels:
        assert f"kernel {kernel.name}" in text
    for mark in ("argument 0\\nf32[5,4]", "captured 0\\nf32[8,4]", "output 0\\nf32[]"):
        assert mark in text
    assert "saved 0" in text and "gradient 0" in text
    assert 'fillcolor="#ffd59e"' in text  # the matrix products, apart from the kernels


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_program_picture_renders(tmp_path):
    mlp_step_lowered().graph(tmp_path / "step")
    assert (tmp_path / "step.dot").read_text().startswith("digraph")
    assert "<svg" in (tmp_path / "step.svg").read_text()


def test_dump_writes_the_picture(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_DUMP", str(tmp_path))

    def double(x):
        return x * 2

    fg.jit(double)(fg.randn(3))
    assert (tmp_path / "double.1.dot").read_text().startswith("digraph program {")
