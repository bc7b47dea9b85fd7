"""What a traced function does to tensors the caller holds, which the
program writes back after every run: in-place changes to its inputs and
captured tensors, and the ``.grad`` of leaves it reads and assigns. A
change no program output can carry (a flag of a tensor the caller holds, a
view changed in place) is a TracingError. The trace's own changes are
undone when it ends: the program's run makes them.
"""

from __future__ import annotations

import numpy as np

from ..eager import grad_mode
from ..ir import primitives as P
from .tracing_error import TracingError, user_line


class WriteBacks:
    """The part of a ``Trace`` (trace.py) that follows tensors the caller
    holds, by the trace's vars of them."""

    def __init__(self):
        super().__init__()
        self.grad_reads: dict = {}  # id(leaf) -> (leaf, grad was None) at first read
        self.grad_sources: dict = {}  # id(grad tensor) -> leaf it was read from
        self.grad_writes: dict = {}  # id(leaf) -> leaf whose .grad the function assigned
        self.snapshots: dict = {}  # id(tensor) -> (tensor, data before the first change)
        self.aliases: dict = {}  # id(detached alias) -> the tensor whose storage it shares
        self.retained: dict = {}  # id -> tensor retain_grad() was called on (kept: ids unique)
        self._written_grads = None  # see written_grads
        self.undo: list = []  # callables taking back Python side effects (state an optimizer made)
        # id(version counter) -> (the counter, its version once last written):
        # views of a storage written since their vars were bound are taken again
        self.written: dict = {}
        self.views_taken_again: dict = {}  # id(view) -> the version it was taken again at

    def rebind(self, tensor, result) -> None:
        """``tensor`` now holds ``result``'s value (an in-place operation)."""
        if tensor._base is not None:
            raise TracingError(
                f"in-place modification of a view at {user_line()} cannot be "
                "compiled; modify the base tensor instead"
            )
        counter = tensor._version_counter
        self.written[id(counter)] = (counter, counter[0] + 1)  # the version it is about to get
        self.var_of(tensor)  # a captured tensor is read before it is overwritten
        if id(tensor) in self.initial_vars and id(tensor) not in self.snapshots:
            self.snapshots[id(tensor)] = (tensor, tensor._data.copy())
        self._bind(tensor, self.var_of(result))
        base = self.aliases.get(id(tensor))
        if base is not None:  # x.data.add_(...) changes x
            if base.grad_fn is not None:
                # eagerly its values change and its graph stays: no one value
                # of the program is both
                self.unsupported("changing a computed tensor's values through .data or detach()")
            self.rebind(base, result)

    def requires_grad_set(self, tensor) -> None:
        """A leaf's flag changes: of the caller's tensor, or of a constant the
        function made (a new leaf on every call, ``zeros(3, requires_grad=True)``),
        no program output can carry it; a value the function computed from its
        inputs may become a leaf (what ``grad(f)`` does with its arguments)."""
        if self._existed(tensor) or id(tensor) in self.created:
            self.unsupported("setting requires_grad of a tensor the function did not compute")

    def detach_in_place(self, tensor) -> None:
        """``tensor.detach_()``: from now on the value passes no gradient. Of a
        tensor the caller holds, its flags would change, which a program
        cannot do on later calls."""
        if self._existed(tensor) and tensor._requires_grad:
            self.unsupported("detach_() of a tensor the function did not make")
        self._bind(tensor, self.var_of(P.stop_gradient(tensor)))

    def rebind_view(self, view, value) -> None:
        """``view``, changed in place through its base, now holds ``value``."""
        self._bind(view, self.var_of(value))

    def current_view(self, view, var):
        """The var of ``view``'s value now: ``var``, or, when its base was
        written since, the view taken again from the base (as eager mode
        reads it through the storage they share)."""
        counter = view._version_counter
        written = self.written.get(id(counter))
        bound = max(view._view_version, self.views_taken_again.get(id(view), -1))
        if written is None or written[1] <= bound:
            return var
        base = view._base
        if base._layout_version > view._view_version:
            self.unsupported("reading a view taken before its base's shape changed in place")
        with grad_mode.no_grad():  # eager mode refuses a gradient through such a view
            again = base
            for prim, params, others in view._view_steps:
                again = prim(again, *others, **params)
        self.views_taken_again[id(view)] = counter[0]
        var = self.var_of(again)
        self._bind(view, var)
        return var

    def relayout(self, tensor, view) -> None:
        """``tensor`` is now ``view``, its elements in another shape
        (``squeeze_()``, ``t_()``, ...). A tensor the caller holds would keep
        its shape on later calls, and an alias's later in-place changes
        would reach its source in the wrong shape."""
        if self._existed(tensor) or id(tensor) in self.aliases:
            self.unsupported(
                "an in-place shape change (squeeze_(), t_(), resize_(), ...) of a tensor "
                "the function did not compute"
            )
        self._bind(tensor, self.var_of(view))

    def alias(self, alias, tensor) -> None:
        """``alias`` (from detach() or .data) shares ``tensor``'s storage."""
        self.aliases[id(alias)] = tensor

    def read_grad(self, leaf, grad) -> None:
        if id(leaf) not in self.grad_reads and id(leaf) not in self.grad_writes:
            self.grad_reads[id(leaf)] = (leaf, grad is None)
        if grad is not None and id(grad) not in self.vars:
            self.grad_sources[id(grad)] = leaf
            self._watch(grad)

    def write_grad(self, leaf) -> None:
        if id(leaf) not in self.grad_writes:
            self.grad_writes[id(leaf)] = (leaf, leaf._grad)
            if self._existed(leaf):
                self.ref(leaf)  # found again on later calls (zero_grad of an unused parameter)

    def _existed(self, tensor) -> bool:
        """Whether ``tensor`` existed before the call: an input, a captured
        tensor, or one the function never computed with (tensors it makes
        have vars or are constants it created)."""
        key = id(tensor)
        return key in self.initial_vars or (key not in self.vars and key not in self.created)

    def mutations(self) -> list:
        """(Ref, new var) for the arguments and captured tensors changed in place."""
        changed = []
        for tensor, var in self.initial_vars.values():
            if self.vars[id(tensor)] is not var:
                changed.append((self.ref(tensor), self.vars[id(tensor)]))
        return changed

    def written_grads(self) -> list:
        """The var of the ``.grad`` each leaf of ``leaves(grad_writes)`` holds
        when the trace ends (None where it was set to None). Read once: a
        program made later for other sizes takes the trace's, not what the
        leaves hold by then."""
        if self._written_grads is None:
            self._written_grads = [
                None if leaf._grad is None else self.var_of(leaf._grad)
                for leaf, _ in self.grad_writes.values()
                if self._existed(leaf)
            ]
        return self._written_grads

    def leaves(self, table: dict) -> list:
        """The leaves in ``grad_reads``/``grad_writes`` a later call can reach
        (those that existed before it), with what was recorded for them."""
        return [(self.ref(leaf), info) for leaf, info in table.values() if self._existed(leaf)]

    def restore(self, python_too: bool) -> None:
        """Undoes the function's side effects on inputs, captured tensors and
        ``.grad``, which the program applies when it runs; with
        ``python_too``, also what ``undo`` lists (Python state such as an
        optimizer's first state: for ``lower``, which traces without applying
        the call, and for a trace that failed)."""
        for tensor, data in self.snapshots.values():
            np.copyto(tensor._data, data)
        for leaf, grad in self.grad_writes.values():
            leaf._grad = grad
        if python_too:
            for undo in reversed(self.undo):
                undo()
