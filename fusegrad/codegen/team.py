"""Handing a native call to another core without the operating system.

Waking a thread blocked on a lock and waiting for it to signal back takes
the kernel twice; on the 2-core virtual machines measured, a kernel split
across a Python thread pool that way took 140 us more than its parts run
one after the other (the hypervisor wakes an idle virtual core slowly), so
only long kernels gained. Here a worker spins on a word of shared memory
for a while after each call, as OpenMP's and OpenBLAS's threads do: the
caller writes the call (a function's address and its pointer-sized
arguments) into the worker's slot, publishes it by bumping a generation
number, runs its own part, and spins until the worker publishes that
generation as done.

A worker that saw nothing for as long as the last call asked it to linger
(in cycles) marks itself asleep and returns, and its thread blocks until
woken (``runtime/threads.py``). The caller's publish and the worker's going
to sleep are each a sequentially consistent store followed by a load of the
other's word, so one of them always sees the other: a call is never posted
to a worker that missed it.

The three functions, compiled once (they depend on nothing but the target):
``team_work(slot)`` (the worker's loop), ``team_post(slot, generation) ->
asleep`` and ``team_join(slot, generation, spin_cycles) -> done``.
"""

from __future__ import annotations

import ctypes

from llvmlite import ir

from .target import compile_function, target_machine

I64 = ir.IntType(64)

# A slot is SLOT_WORDS int64s: the call in the first cache lines, the
# worker's words each in a line of its own (the caller spins reading DONE).
POSTED, FUNCTION, COUNT, LINGER, ARGUMENTS = 0, 1, 2, 3, 4
MAX_ARGUMENTS = 40
DONE, ASLEEP = 48, 56
SLOT_WORDS = 64


def work():
    """``team_work(slot)``: runs each call posted to the slot, until none
    comes for the cycles the slot's LINGER word says (then the slot is
    marked asleep)."""
    prototype = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    return compile_function(f"team work {MAX_ARGUMENTS}", _work_ir, prototype)


def post():
    """``team_post(slot, generation) -> asleep``: publishes the call written
    into the slot; nonzero when the worker had gone to sleep (wake it)."""
    prototype = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64)
    return compile_function("team post", _post_ir, prototype)


def join():
    """``team_join(slot, generation, spin_cycles) -> done``: nonzero once the
    worker finished that generation's call, zero if it did not within
    ``spin_cycles`` (ask again)."""
    prototype = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    return compile_function("team join", _join_ir, prototype)


def _module(name: str) -> ir.Module:
    module = ir.Module(name=name)
    module.triple = target_machine().triple
    return module


def _word(b, slot, index: int):
    return b.gep(slot, [ir.Constant(I64, index)])


def _load(b, slot, index: int, ordering: str):
    return b.load_atomic(_word(b, slot, index), ordering, 8)


def _store(b, value, slot, index: int, ordering: str) -> None:
    b.store_atomic(value, _word(b, slot, index), ordering, 8)


def _pause(b) -> None:
    """The spin-wait hint (x86's pause), which frees the core's shared
    resources for its other thread; nothing on other targets."""
    if target_machine().triple.startswith(("x86_64", "i686", "i386")):
        hint = b.module.globals.get("llvm.x86.sse2.pause")
        if hint is None:
            hint = ir.Function(b.module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse2.pause")
        b.call(hint, [])


def _cycles(b):
    counter = b.module.globals.get("llvm.readcyclecounter")
    if counter is None:
        counter = ir.Function(b.module, ir.FunctionType(I64, []), "llvm.readcyclecounter")
    return b.call(counter, [])


def _spin(b, function, turns, spin_cycles, ready, on_ready, on_timeout) -> None:
    """Spins until ``ready(b)`` (an i1 read each turn) holds, then branches to
    ``on_ready``, or after ``spin_cycles`` cycles (and at most as many turns,
    where the cycle counter reads zero) to ``on_timeout``. ``turns``: an
    i64 made in the entry block, where every alloca must be."""
    b.store(ir.Constant(I64, 0), turns)
    start = _cycles(b)
    loop = function.append_basic_block("spin")
    waiting = function.append_basic_block("spin_wait")
    b.branch(loop)
    b.position_at_end(loop)
    b.cbranch(ready(b), on_ready, waiting)
    b.position_at_end(waiting)
    _pause(b)
    turn = b.add(b.load(turns), ir.Constant(I64, 1))
    b.store(turn, turns)
    elapsed = b.sub(_cycles(b), start)
    more = b.and_(
        b.icmp_unsigned("<", elapsed, spin_cycles), b.icmp_unsigned("<", turn, spin_cycles)
    )
    b.cbranch(more, loop, on_timeout)


def _work_ir(symbol: str) -> str:
    module = _module("team_work")
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64.as_pointer()]), symbol)
    (slot,) = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    seen, posted, turns = b.alloca(I64), b.alloca(I64), b.alloca(I64)
    _store(b, ir.Constant(I64, 0), slot, ASLEEP, "seq_cst")
    b.store(_load(b, slot, DONE, "acquire"), seen)
    wait = function.append_basic_block("wait")
    run = function.append_basic_block("run")
    sleep = function.append_basic_block("sleep")
    b.branch(wait)

    def new_call(b):
        b.store(_load(b, slot, POSTED, "acquire"), posted)
        return b.icmp_unsigned("!=", b.load(posted), b.load(seen))

    b.position_at_end(wait)
    _spin(b, function, turns, b.load(_word(b, slot, LINGER)), new_call, run, sleep)

    # Going to sleep: marked first, then the generation read once more, so a
    # call posted meanwhile is run rather than missed (see the module's notes).
    b.position_at_end(sleep)
    _store(b, ir.Constant(I64, 1), slot, ASLEEP, "seq_cst")
    b.store(_load(b, slot, POSTED, "seq_cst"), posted)
    missed = b.icmp_unsigned("!=", b.load(posted), b.load(seen))
    woken = function.append_basic_block("woken")
    leave = function.append_basic_block("leave")
    b.cbranch(missed, woken, leave)
    b.position_at_end(woken)
    _store(b, ir.Constant(I64, 0), slot, ASLEEP, "seq_cst")
    b.branch(run)
    b.position_at_end(leave)
    b.ret_void()

    b.position_at_end(run)
    callee = b.load(_word(b, slot, FUNCTION))
    count = b.load(_word(b, slot, COUNT))
    arguments = [b.load(_word(b, slot, ARGUMENTS + k)) for k in range(MAX_ARGUMENTS)]
    finished = function.append_basic_block("finished")
    choice = b.switch(count, finished)
    for n in range(MAX_ARGUMENTS + 1):
        case = function.append_basic_block(f"call{n}")
        choice.add_case(ir.Constant(I64, n), case)
        b.position_at_end(case)
        kind = ir.FunctionType(ir.VoidType(), [I64] * n)
        b.call(b.inttoptr(callee, kind.as_pointer()), arguments[:n])
        b.branch(finished)
    b.position_at_end(finished)
    generation = b.load(posted)
    _store(b, generation, slot, DONE, "release")
    b.store(generation, seen)
    b.branch(wait)
    return str(module)


def _post_ir(symbol: str) -> str:
    module = _module("team_post")
    function = ir.Function(module, ir.FunctionType(I64, [I64.as_pointer(), I64]), symbol)
    slot, generation = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    _store(b, generation, slot, POSTED, "seq_cst")
    b.ret(_load(b, slot, ASLEEP, "seq_cst"))
    return str(module)


def _join_ir(symbol: str) -> str:
    module = _module("team_join")
    signature = ir.FunctionType(I64, [I64.as_pointer(), I64, I64])
    function = ir.Function(module, signature, symbol)
    slot, generation, spin_cycles = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    done = function.append_basic_block("done")
    timeout = function.append_basic_block("timeout")
    _spin(
        b,
        function,
        b.alloca(I64),
        spin_cycles,
        lambda b: b.icmp_unsigned("==", _load(b, slot, DONE, "acquire"), generation),
        done,
        timeout,
    )
    b.position_at_end(done)
    b.ret(ir.Constant(I64, 1))
    b.position_at_end(timeout)
    b.ret(ir.Constant(I64, 0))
    return str(module)
