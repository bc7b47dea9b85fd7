"""``fusegrad.optim``: the optimizers (SGD, Adam, AdamW, RMSprop, Adagrad,
Adadelta, LBFGS) on the ``Optimizer`` base, and ``lr_scheduler``."""

from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = [
    "Adadelta",
    "Adagrad",
    "Adam",
    "AdamW",
    "LBFGS",
    "Optimizer",
    "RMSprop",
    "SGD",
    "lr_scheduler",
]
