"""``pipeline.checkpoints.each``, how the checkpoint stages spread their jobs over processes: every
job's result once, in this process or spawned ones alike, and a failing job stops the stage with
its own error after the finished ones were handed over (so their results are saved first)."""

from __future__ import annotations

import os

import pytest

from enigma.pipeline.checkpoints import each


def square(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def fails_on_three(x: int) -> int:
    if x == 3:
        raise ValueError(f"job {x} failed")
    return x


@pytest.mark.parametrize("workers", [1, 2])
def test_every_job_once_in_this_process_or_in_workers(workers):
    got = dict(each(workers, square, [(x,) for x in range(5)]))
    assert {job[0]: r[0] for job, r in got.items()} == {x: x * x for x in range(5)}
    pids = {r[1] for r in got.values()}
    assert (pids == {os.getpid()}) if workers == 1 else (os.getpid() not in pids and 1 <= len(pids) <= 2)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failing_job_raises_its_error_after_the_finished_ones(workers):
    seen = []
    with pytest.raises(ValueError, match="job 3 failed"):
        for job, r in each(workers, fails_on_three, [(1,), (2,), (3,)]):
            seen.append(r)
    assert set(seen) <= {1, 2} and (workers == 2 or seen == [1, 2])
