"""Differential fuzzing of fusegrad's eager mode against PyTorch itself: the
op-graph fuzzer's programs (tools/fuzz.py), whose source runs unchanged with
``fg`` bound to torch, run eagerly in both; their outputs (values, dtypes,
shapes), the errors they raise and their gradients must agree, within the
rounding noise fusegrad's own eager runs measure (docs/fuzzing.md).

    python tools/fuzz_torch.py --programs 300 --seed 0

Needs PyTorch (an optional comparison, as the benchmarks'); the suite never
runs it. Each difference is printed with the program's source.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import fuzz
import torch


def torch_input(array, requires_grad):
    """A torch tensor of ``array``'s values (layouts are fusegrad's concern)."""
    tensor = torch.tensor(np.array(array, order="C"))  # (ascontiguousarray makes 0-d 1-d)
    return tensor.requires_grad_() if requires_grad else tensor


def torch_namespace(program) -> dict:
    namespace = {"np": np, "fg": torch, "F": torch.nn.functional, "as_input": torch_input}
    exec(compile(program.source, f"<program {program.digest}>", "exec"), namespace)
    return namespace


def outputs_and_gradients(module, program_function, inputs, seed):
    """(outputs, gradients of the outputs against random cotangents with
    respect to each input) of one eager run, by ``module`` (fusegrad or
    torch). Each output has its cotangent, whether it needs a gradient or not,
    so outputs one side differentiates (with zero gradients) and the other
    does not (floor's, round's) change no gradient."""
    outputs = fuzz.as_list(program_function(*inputs))
    rng = np.random.default_rng(seed)
    cotangents = [rng.standard_normal(tuple(o.shape)) for o in outputs]
    pairs = [(o, module.tensor(c).to(o.dtype)) for o, c in zip(outputs, cotangents)]
    pairs = [(o, c) for o, c in pairs if o.requires_grad]
    if not pairs:
        return outputs, None
    wanted, cotangents = zip(*pairs)
    gradients = module.autograd.grad(wanted, inputs, cotangents, allow_unused=True)
    return outputs, list(gradients)


def differences(program) -> list:
    """(kind, detail) for each way PyTorch's eager run differs from fusegrad's."""
    precision = program.precision
    mine, theirs = fuzz.load(program), torch_namespace(program)
    seed = program.seed

    def fusegrad_run(inputs):
        return outputs_and_gradients(fuzz.fg, mine["program"], inputs, seed)

    try:
        fg_outputs, fg_grads = fusegrad_run(mine["make_inputs"](requires_grad=True))
    except Exception:
        return []  # eager fusegrad refuses: the op-graph fuzzer draws another program
    try:
        inputs = theirs["make_inputs"](requires_grad=True)
        t_outputs, t_grads = outputs_and_gradients(torch, theirs["program"], inputs, seed)
    except Exception as error:
        return [("torch raises", f"{type(error).__name__}: {str(error)[:300]}")]

    def fusegrad_values(inputs):
        outputs, gradients = fusegrad_run(inputs)
        return [fuzz.snapshot(outputs), fuzz.snapshot(gradients or [])]

    sets = fuzz.input_sets(mine["make_inputs"], precision, requires_grad=True)
    others = fuzz.noise_runs(fusegrad_values, sets, precision)
    found = []
    flags = [o.requires_grad for o in fg_outputs], [o.requires_grad for o in t_outputs]
    if flags[0] != flags[1]:
        found.append(("requires-grad", f"outputs require grad: {flags[0]}, torch's {flags[1]}"))
    for name, want, got, index in (
        ("output", fg_outputs, t_outputs, 0),
        ("gradient", fg_grads or [], t_grads or [], 1),
    ):
        want, got = fuzz.snapshot(want), fuzz.snapshot(got)
        noise = fuzz.noise_of(want, [o[index] for o in others])
        for k, (g, w, n) in enumerate(zip(got, want, noise)):
            problem = fuzz.mismatch(g, w, n, precision)
            if problem is not None:
                found.append((f"{name}:{problem[0]}", f"{name} {k}: {problem[1]}"))
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    kinds: dict = {}
    for index in range(args.programs):
        program = fuzz.draw_program(args.seed, index)[0]
        found = differences(program)
        for kind, _ in found:
            kinds[kind] = kinds.get(kind, 0) + 1
        if found:
            print(f"---- program {index} of seed {args.seed}:")
            print(program.source)
            print("\n".join(f"  {kind}: {detail}" for kind, detail in found))
    tally = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items())) or "none"
    print(f"programs: {args.programs}; differences by kind: {tally}")
    return 1 if kinds else 0


if __name__ == "__main__":
    sys.exit(main())
