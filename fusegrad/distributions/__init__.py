"""``fusegrad.distributions``: the probability distributions PyTorch programs
use most (``Normal``, ``Bernoulli``, ``Categorical``, ``Uniform``,
``Exponential``, ``MultivariateNormal``, ``Independent``) and
``kl_divergence`` between them. Every density is written with fusegrad's
ops, so it differentiates (to any order) and compiles; ``rsample`` draws
reparameterized samples that carry gradients to the parameters, ``sample``
draws without them. Parameters are checked as PyTorch checks them
(``validate_args``), eagerly. Each class lives in the submodule PyTorch
has it in (``distributions.normal.Normal``, ``distributions.kl``)."""

from .bernoulli import Bernoulli
from .categorical import Categorical
from .distribution import Distribution
from .exponential import Exponential
from .independent import Independent
from .kl import kl_divergence, register_kl
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .uniform import Uniform

__all__ = [
    "Bernoulli",
    "Categorical",
    "Distribution",
    "Exponential",
    "Independent",
    "MultivariateNormal",
    "Normal",
    "Uniform",
    "kl_divergence",
    "register_kl",
]
