"""A two-layer graph convolutional network (Kipf & Welling), written as pygcn
writes it: ``GraphConvolution`` layers holding their weight and bias as
Parameters, ``torch.mm`` of the features by the weight, then the product with
the normalized adjacency matrix, a sparse COO tensor; ReLU, dropout (p=0),
``log_softmax`` and ``nll_loss`` on the training nodes, Adam with weight decay,
and pygcn's ``accuracy``. Each step trains on the training nodes and then
evaluates the validation nodes in eval mode, as pygcn's ``train(epoch)`` does.

The graph is a small synthetic citation graph from a seeded numpy generator:
nodes of three classes, bag-of-words features drawn with class-dependent
probabilities, links more likely within a class. The adjacency is built as
``sparse_coo_tensor`` of A + I, its degrees are ``torch.sparse.sum`` over the
rows, and its entries are scaled to D^-1/2 (A + I) D^-1/2 and coalesced; the
features are a sparse tensor too (``to_sparse``). The three spellings of the
sparse product (``torch.spmm``, ``torch.sparse.mm``, ``@``) all appear.
"""

import numpy as np

NODES, FEATURES, CLASSES, HIDDEN = 60, 20, 3, 16
STEPS = 20
TRAIN, VAL = range(0, 30), range(30, 45)


def _graph(rng):
    labels = rng.integers(0, CLASSES, NODES)
    word_rates = rng.uniform(0.05, 0.5, (CLASSES, FEATURES))
    features = (rng.random((NODES, FEATURES)) < word_rates[labels]).astype(np.float32)
    features /= np.maximum(features.sum(1, keepdims=True), 1.0)  # pygcn's row normalization
    same = labels[:, None] == labels[None, :]
    links = np.triu(rng.random((NODES, NODES)) < np.where(same, 0.15, 0.02), k=1)
    rows, cols = np.nonzero(links | links.T | np.eye(NODES, dtype=bool))
    return labels, features, np.stack([rows, cols])


def run(torch, compile=None) -> dict:
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(7)
    labels, features, edges = _graph(rng)

    edges = torch.tensor(edges)
    adjacency = torch.sparse_coo_tensor(edges, torch.ones(edges.shape[1]), (NODES, NODES))
    degree = torch.sparse.sum(adjacency, dim=1).to_dense()
    scale = degree.pow(-0.5)
    weights = adjacency._values() * scale[edges[0]] * scale[edges[1]]
    adj = torch.sparse_coo_tensor(edges, weights, (NODES, NODES)).coalesce()
    features = torch.tensor(features).to_sparse()
    labels = torch.tensor(labels)
    idx_train, idx_val = torch.tensor(list(TRAIN)), torch.tensor(list(VAL))

    class GraphConvolution(nn.Module):
        def __init__(self, in_features, out_features, product):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(in_features, out_features))
            self.bias = nn.Parameter(torch.empty(out_features))
            self.product = product

        def forward(self, input, adj):
            support = torch.mm(input, self.weight)
            return self.product(adj, support) + self.bias

    class GCN(nn.Module):
        def __init__(self, dropout):
            super().__init__()
            self.gc1 = GraphConvolution(FEATURES, HIDDEN, torch.spmm)
            self.gc2 = GraphConvolution(HIDDEN, CLASSES, torch.sparse.mm)
            self.dropout = dropout

        def forward(self, x, adj):
            x = F.relu(self.gc1(x, adj))
            x = F.dropout(x, self.dropout, training=self.training)
            return F.log_softmax(self.gc2(x, adj), dim=1)

    model = GCN(dropout=0.0)
    with torch.no_grad():
        for p in model.parameters():
            scale_init = 1.0 / np.sqrt(p.shape[-1])
            values = rng.uniform(-scale_init, scale_init, tuple(p.shape))
            p.copy_(torch.tensor(values, dtype=torch.float32))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05, weight_decay=5e-4)

    def accuracy(output, labels):
        preds = output.max(1)[1].type_as(labels)
        correct = preds.eq(labels).double()
        return correct.sum() / len(labels)

    def step(features, adj):
        model.train()
        optimizer.zero_grad()
        output = model(features, adj)
        loss_train = F.nll_loss(output[idx_train], labels[idx_train])
        acc_train = accuracy(output[idx_train], labels[idx_train])
        loss_train.backward()
        optimizer.step()
        model.eval()
        output = model(features, adj)
        loss_val = F.nll_loss(output[idx_val], labels[idx_val])
        return loss_train, acc_train, loss_val, accuracy(output[idx_val], labels[idx_val])

    step = compile(step) if compile else step
    history = []
    for _ in range(STEPS):
        history.append([t.item() for t in step(features, adj)])

    with torch.no_grad():
        model.eval()
        output = model(features, adj)
        smoothed = adj @ output.exp()
        return {
            "history": history,
            "test_accuracy": accuracy(output[45:], labels[45:]).item(),
            "predictions": output.max(1)[1].tolist(),
            "log_probs_node0": output[0].tolist(),
            "smoothed_node0": smoothed[0].tolist(),
            "gc1_weight_row0": model.gc1.weight[0].tolist(),
            "gc2_bias": model.gc2.bias.tolist(),
            "adjacency": {
                "nnz": adj._nnz(),
                "coalesced": adj.is_coalesced(),
                "layout": str(adj.layout).split(".")[-1],
                "degree_first": degree[:5].tolist(),
                "row_sums_first": adj.to_dense().sum(1)[:5].tolist(),
                "transposed_equal": bool((adj.t().to_dense() == adj.to_dense()).all()),
            },
            "features": {"nnz": features._nnz(), "shape": list(features.shape)},
        }
