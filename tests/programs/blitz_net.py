"""The "Deep Learning with PyTorch: A 60 Minute Blitz" tutorial: its neural-networks
chapter and its autograd chapter, one snippet after another.

The network is the chapter's LeNet on 32x32 inputs, with 3x3 convolutions and the
``num_flat_features`` helper. The snippets: list the parameters, backpropagate a
given gradient, follow ``loss.grad_fn`` back through ``next_functions``, update the
weights by hand, then with ``optim.SGD``; from the autograd chapter,
``Q.backward(gradient=...)``, which results require grad, and fine-tuning only a
replaced last layer with the rest frozen.
"""

import math
import re

import numpy as np

BATCH = 4
STEPS = 5
FINETUNE_STEPS = 3


def run(torch, compile=None) -> dict:
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    rng = np.random.default_rng(0)

    def randn(*shape, requires_grad=False):
        values = rng.standard_normal(shape)
        return torch.tensor(values, dtype=torch.float32, requires_grad=requires_grad)

    def init_from_numpy(layer):
        """PyTorch's default initialization, uniform in +-1/sqrt(fan_in), drawn from numpy."""
        bound = 1 / math.sqrt(layer.weight[0].numel())
        with torch.no_grad():
            for p in (layer.weight, layer.bias):
                p.copy_(torch.tensor(rng.uniform(-bound, bound, tuple(p.shape)), dtype=p.dtype))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            # 1 input image channel, 6 output channels, 3x3 square convolution
            self.conv1 = nn.Conv2d(1, 6, 3)
            self.conv2 = nn.Conv2d(6, 16, 3)
            self.fc1 = nn.Linear(16 * 6 * 6, 120)  # 6x6 from the image dimension
            self.fc2 = nn.Linear(120, 84)
            self.fc3 = nn.Linear(84, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), (2, 2))  # a (2, 2) window
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # a square window needs one number
            x = x.view(-1, self.num_flat_features(x))
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            return self.fc3(x)

        def num_flat_features(self, x):
            size = x.size()[1:]  # all dimensions except the batch dimension
            num_features = 1
            for s in size:
                num_features *= s
            return num_features

    net = Net()
    for layer in (net.conv1, net.conv2, net.fc1, net.fc2, net.fc3):
        init_from_numpy(layer)
    result = {"repr": repr(net)}

    params = list(net.parameters())
    result["parameter_count"] = len(params)
    result["conv1_weight_size"] = list(params[0].size())

    input = randn(1, 1, 32, 32)
    out = net(input)
    result["out"] = out.tolist()

    net.zero_grad()
    out.backward(randn(1, 10))
    result["conv1_bias_grad_after_given_gradient"] = net.conv1.bias.grad.tolist()

    output = net(input)
    target = randn(10).view(1, -1)  # the same shape as the output
    criterion = nn.MSELoss()
    loss = criterion(output, target)
    result["loss"] = loss.item()
    # what the tutorial prints following the graph back: MSELoss, Linear, its bias
    linear = loss.grad_fn.next_functions[0][0]
    result["grad_fn_chain"] = [
        re.sub(r"0x[0-9a-f]+", "0x...", repr(node))
        for node in (loss.grad_fn, linear, linear.next_functions[0][0])
    ]

    net.zero_grad()
    result["conv1_bias_grad_after_zero_grad"] = net.conv1.bias.grad  # None: set_to_none
    loss.backward()
    result["conv1_bias_grad_after_backward"] = net.conv1.bias.grad.tolist()

    learning_rate = 0.01
    for f in net.parameters():
        f.data.sub_(f.grad.data * learning_rate)
    result["fc3_bias_after_manual_update"] = net.fc3.bias.tolist()

    optimizer = optim.SGD(net.parameters(), lr=0.01)

    def train_step(input, target):
        optimizer.zero_grad()  # gradients accumulate otherwise
        loss = criterion(net(input), target)
        loss.backward()
        optimizer.step()
        return loss

    if compile:
        train_step = compile(train_step)
    inputs, targets = randn(BATCH, 1, 32, 32), randn(BATCH, 10)
    result["sgd_losses"] = [train_step(inputs, targets).item() for _ in range(STEPS)]

    # the autograd chapter: Q = 3a^3 - b^2, backpropagated from a vector gradient
    a = torch.tensor([2.0, 3.0], requires_grad=True)
    b = torch.tensor([6.0, 4.0], requires_grad=True)
    Q = 3 * a**3 - b**2
    external_grad = torch.tensor([1.0, 1.0])
    Q.backward(gradient=external_grad)
    result["Q_grads"] = [a.grad.tolist(), b.grad.tolist()]
    result["Q_grads_as_derived"] = [(9 * a**2 == a.grad).tolist(), (-2 * b == b.grad).tolist()]

    # an operation's result requires grad if any of its inputs does
    x, y, z = randn(5, 5), randn(5, 5), randn(5, 5, requires_grad=True)
    result["requires_grad"] = {"x + y": (x + y).requires_grad, "x + z": (x + z).requires_grad}

    # fine-tuning: freeze the network, replace the classifier, train only that
    for param in net.parameters():
        param.requires_grad = False
    frozen_conv1_weight = net.conv1.weight.clone()
    net.fc3 = nn.Linear(84, 10)
    init_from_numpy(net.fc3)
    # train_step reads net and optimizer from its closure: the same (compiled) step now
    # trains the new fc3 with the new optimizer
    optimizer = optim.SGD(net.parameters(), lr=1e-2, momentum=0.9)
    result["trainable_after_freezing"] = [n for n, p in net.named_parameters() if p.requires_grad]
    result["finetune_losses"] = [train_step(inputs, targets).item() for _ in range(FINETUNE_STEPS)]
    result["frozen_weights_unchanged"] = torch.equal(net.conv1.weight, frozen_conv1_weight)
    result["fc3_weight[0]"] = net.fc3.weight[0].tolist()
    return result
