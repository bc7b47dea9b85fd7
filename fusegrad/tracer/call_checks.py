"""What a call of a compiled program must find before the program runs.

The forward's own guards (Python control flow on tensor values) are values
the program computes; these are the checks made before it runs: Python
values as traced, Python's random draws taking the traced path, each tensor
the function reads but was not given found where it was and as it was, each
``.grad`` it read None or not as traced, and the tensors it reads and writes
sharing memory as traced. A failed check changes nothing: the call tries
another program or traces again.
"""

from __future__ import annotations

from ..eager import grad_mode
from ..eager.tensor import Tensor, storage_pattern
from .pyrandom import Divergence, same_result


class CallChecks:
    """``failure``: why the last check failed, for the recompile log."""

    def __init__(self, trace, input_meta: list, input_requires_grad: list, sharing, writes: bool):
        self.captured = trace.captured
        self.python_guards = trace.python_guards
        self.grad_reads = trace.leaves(trace.grad_reads)  # (leaf ref, grad was None)
        self.lookup = trace.lookup  # where tensors the function did not receive are now
        self.draw_specs, self.draw_guards = trace.draw_specs, trace.draw_guards
        num_args = len(trace.inputs)
        self._captured_checks = list(
            zip(self.captured, input_meta[num_args:], input_requires_grad[num_args:])
        )
        self.sharing, self.writes = sharing, writes
        self.failure = None

    @property
    def arguments_decide(self) -> bool:
        """Whether nothing but the call's arguments decides (no check here)."""
        return not (
            self.draw_specs
            or self.python_guards
            or self.lookup is not None
            or self.captured
            or self.grad_reads
        )

    def descriptions(self) -> list:
        return [description for _, _, description in self.python_guards]

    def python_guards_hold(self) -> bool:
        return all(read() == value for read, value, _ in self.python_guards)

    def drawn(self, draws) -> list | None:
        """This call's draws, in the traced order; None when they went another
        way than traced (a guard: the program does not apply)."""
        try:
            drawn = [draws.get(k, spec) for k, spec in enumerate(self.draw_specs)]
        except Divergence:
            self.failure = "Python's random draws took another path"
            return None
        for k, observed in self.draw_guards:
            if not same_result(drawn[k], observed):
                self.failure = f"a random draw gave {drawn[k]!r}, traced {observed!r}"
                return None
        return drawn

    def captured_inputs(self, args, located, drawn=()) -> list:
        """The captured tensors and numbers as they are now, or None if one no
        longer fits the trace."""
        found = []
        enabled = grad_mode.is_grad_enabled()
        for c, (shape, dtype), requires in self._captured_checks:
            t = c.current(args, located, drawn)
            if t is None:
                return None
            if c.read is None and c.draw is None:
                if not isinstance(t, Tensor) or t._data.shape != shape or t._dtype is not dtype:
                    return None
                if enabled and t._requires_grad != requires:
                    return None
            found.append(t)
        for ref, was_none in self.grad_reads:
            if (ref.resolve(args, located)._grad is None) != was_none:
                return None
        return found

    def inputs_found(self, args: list, drawn, call):
        """(located, captured): where the tensors the function was not given
        are, and the program's inputs beyond the arguments; None when one is
        no longer as traced (``failure`` says which)."""
        for read, value, description in self.python_guards:
            now = read()
            if now != value:
                self.failure = f"{description}: {value!r} -> {now!r}"
                return None
        located = ()
        if self.lookup is not None:
            located = self.lookup(*call)
            if located is None or not all(isinstance(t, Tensor) for t in located if t is not None):
                self.failure = "a tensor the function reads is no longer where it was found"
                return None
        captured = (
            self.captured_inputs(args, located, drawn) if self.captured or self.grad_reads else []
        )
        if captured is None:
            self.failure = "a tensor the function reads changed shape, dtype or requires_grad"
            return None
        if (
            self.writes
            and captured
            and storage_pattern([t for t in (*args, *captured) if isinstance(t, Tensor)])
            != self.sharing
        ):
            # a tensor it reads is now (a view of) one it writes: the trace read them apart
            self.failure = "the tensors it reads share memory otherwise than traced"
            return None
        return located, captured
