"""fusegrad.multiprocessing: the standard library's names, spawn and
start_processes with PyTorch's error propagation, tensors through queues."""

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import spawn_workers

import fusegrad as fg
import fusegrad.multiprocessing as mp

ROOT = Path(__file__).parent.parent


def test_reexports_the_standard_librarys_names():
    for name in ("Process", "Queue", "Pool", "Manager", "Pipe", "Value", "Event"):
        assert hasattr(mp, name) and name in mp.__all__
    assert mp.cpu_count() == multiprocessing.cpu_count()
    assert mp.get_context("spawn").get_start_method() == "spawn"
    assert mp.set_start_method is multiprocessing.set_start_method
    assert "set_sharing_strategy" in mp.__all__


def test_sharing_strategies():
    before = mp.get_sharing_strategy()
    assert before in mp.get_all_sharing_strategies()
    mp.set_sharing_strategy("file_system")
    assert mp.get_sharing_strategy() == "file_system"
    mp.set_sharing_strategy(before)
    with pytest.raises(AssertionError, match="invalid sharing strategy"):
        mp.set_sharing_strategy("telepathy")


def test_tensors_pickle_with_their_values_dtype_and_flags():
    import pickle

    t = fg.tensor([[1, 2], [3, 4]], dtype=fg.int64)
    p = fg.nn.Parameter(fg.ones(2))
    t2, p2 = pickle.loads(pickle.dumps((t, p)))
    assert t2.dtype == fg.int64 and t2.tolist() == [[1, 2], [3, 4]]
    assert type(p2) is type(p) and p2.requires_grad


def test_spawn_calls_fn_with_each_index_and_tensors_come_back_through_a_queue():
    queue = mp.get_context("spawn").Queue()
    mp.spawn(spawn_workers.put_a_tensor, args=(queue, 10.0), nprocs=2)
    results = dict(queue.get(timeout=60) for _ in range(2))
    assert sorted(results) == [0, 1]
    np.testing.assert_array_equal(results[1].numpy(), [1.0, 11.0, 21.0])
    assert results[0].dtype == fg.float32


def test_a_childs_exception_is_raised_in_the_parent_with_its_traceback():
    with pytest.raises(mp.ProcessRaisedException) as raised:
        mp.spawn(spawn_workers.raise_in_the_last, args=(2,), nprocs=2)
    message = str(raised.value)
    assert "-- Process 1 terminated with the following error:" in message
    assert "Traceback (most recent call last)" in message
    assert "ValueError: boom in 1" in message
    assert raised.value.error_index == 1 and raised.value.error_pid > 0


# Exits and signals, in forked children: no pickling, no fresh interpreter.


def _exit_with_index_code(index):
    os._exit(index)


def _kill_self(index):
    os.kill(os.getpid(), signal.SIGKILL)


def _sleep(index, seconds):
    time.sleep(seconds)


def test_a_nonzero_exit_raises_process_exited():
    with pytest.raises(mp.ProcessExitedException, match="process 1 terminated with exit code 1"):
        mp.start_processes(_exit_with_index_code, nprocs=2, start_method="fork")


def test_a_signal_raises_process_exited_with_its_name():
    with pytest.raises(mp.ProcessExitedException) as raised:
        mp.start_processes(_kill_self, start_method="fork")
    assert str(raised.value) == "process 0 terminated with signal SIGKILL"
    assert raised.value.signal_name == "SIGKILL" and raised.value.exit_code == -signal.SIGKILL


def test_without_join_a_context_is_returned_to_join():
    context = mp.start_processes(_sleep, args=(0.3,), nprocs=2, join=False, start_method="fork")
    assert isinstance(context, mp.ProcessContext) and len(context.pids()) == 2
    assert context.join(timeout=0.01) is False
    while not context.join():
        pass
    assert context.join() is True


def test_a_failure_stops_the_other_processes():
    context = mp.start_processes(_sleep, args=(60,), nprocs=2, join=False, start_method="fork")
    os.kill(context.pids()[0], signal.SIGTERM)
    started = time.monotonic()
    with pytest.raises(mp.ProcessExitedException, match="process 0 terminated with signal SIGTERM"):
        context.join(grace_period=0.1)
    assert time.monotonic() - started < 30
    assert not context.processes[1].is_alive()


def test_spawn_warns_of_another_start_method():
    with pytest.warns(FutureWarning, match="only supports start_method=spawn"):
        assert mp.spawn(_sleep, args=(0,), nprocs=0, start_method="fork") is None


def test_children_of_a_script_run_as_torch_get_fusegrad(tmp_path):
    """Under ``python -m fusegrad``, a spawned child imports the script again:
    its ``import torch`` must give fusegrad there too."""
    (tmp_path / "script.py").write_text(
        textwrap.dedent(
            """
            import sys
            import torch
            import torch.multiprocessing as mp

            def report(index, path):
                with open(path, "w") as f:
                    f.write(torch.__name__ + " " + type(torch.ones(1)).__module__)

            if __name__ == "__main__":
                mp.spawn(report, args=(sys.argv[1],), nprocs=1)
            """
        )
    )
    report = tmp_path / "report.txt"
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-m", "fusegrad", "script.py", str(report)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert report.read_text() == "fusegrad fusegrad.eager.tensor"
