"""Grading submissions side by side, each in a worker process of its own, under deadlines the grader enforces.

The grader's process computes what every submission of a chapter shares (the reference namespace, the recorded
function inputs, the self-check), then forks one worker per submission, at most ``jobs`` at a time. A worker runs
the submission in its sandbox, then decodes and judges the values it sent back; a single byte on the result pipe
marks the start of judging. The parent kills a worker that passes its deadline: the sandbox's time limit plus a
margin while it runs, then ``judge_seconds`` for decoding and judging; the worker also limits its own CPU time and
address space for judging, so a values message built to make decoding quadratic, or a check that never ends on a
forged value, costs that submission its grade and nobody else any time. Forking (not spawning) keeps the chapter's
reference namespace, computed once, in every worker; a worker sets PyTorch to one thread, since an OpenMP pool
does not survive a fork.
"""
from __future__ import annotations

import ctypes
import json
import os
import resource
import select
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Callable

JUDGING, RESULT = b"J", b"R"
MARGIN = 60.0  # seconds beyond the sandbox's own time limit before the worker itself is killed


class WorkerFailed(Exception):
    """A worker ended without a result: past its deadline, killed by a limit, or it crashed (the message says)."""


def default_jobs(memory_mb: int) -> int:
    """Workers to run at once: one per CPU this process may use, no more than the free memory holds at the
    per-submission memory limit (at least 1)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        with open("/proc/meminfo") as f:
            free_kb = next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:"))
        by_memory = free_kb // 1024 // max(memory_mb, 1)
    except (OSError, StopIteration, ValueError):
        by_memory = cpus
    return max(1, min(cpus, by_memory))


def _die_with_parent() -> None:
    """Linux: the worker gets SIGKILL when the grader dies (its sandbox then dies with it)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def judging_limits(seconds: float, memory_mb: int) -> None:
    """Limit the calling worker, from now on, to ``seconds`` more CPU time and ``memory_mb`` more address space."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = int(usage.ru_utime + usage.ru_stime + seconds) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    try:
        with open("/proc/self/statm") as f:
            size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (size + memory_mb * 2**20, resource.RLIM_INFINITY))
    except (OSError, ValueError):
        pass


@dataclass
class _Running:
    pid: int
    fd: int
    index: int
    slot: object
    deadline: float
    buffer: bytearray
    judging: bool = False


def run(tasks: list, work: Callable, *, jobs: int, seconds: float, judge_seconds: float, judge_memory_mb: int,
        open_slot: Callable, on_result: Callable) -> None:
    """Run ``work(task, slot, start_judging)`` for every task in a forked worker, ``jobs`` at a time.

    ``open_slot()`` reserves what a submission gets for itself (user id, cgroup) in the parent, which closes it
    (``slot.close()``) once the worker is gone, however it ended. ``work`` returns a JSON-able result and calls
    ``start_judging()`` when the sandbox is done. ``on_result(index, result)`` gets that result, or a
    :class:`WorkerFailed` saying why there is none.
    """
    pending, running = list(range(len(tasks))), {}
    sys.stdout.flush()
    sys.stderr.flush()
    while pending or running:
        while pending and len(running) < jobs:
            index = pending.pop(0)
            slot = open_slot()
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the worker: it keeps no descriptor of the other workers (their pipes, their user ids)
                os.close(r)
                for other in running.values():
                    _close_quietly(other.fd)
                    _close_quietly(getattr(getattr(other.slot, "user", None), "lock_fd", None))
                _worker(work, tasks[index], slot, w, judge_seconds, judge_memory_mb)
            os.close(w)
            running[r] = _Running(pid, r, index, slot, time.monotonic() + seconds + MARGIN, bytearray())
        now = time.monotonic()
        wait = max(0.0, min(job.deadline for job in running.values()) - now)
        ready, _, _ = select.select(list(running), [], [], min(wait, 1.0))
        for fd in ready:
            job = running[fd]
            chunk = os.read(fd, 1 << 16)
            if chunk:
                job.buffer += chunk
                if not job.judging and job.buffer[:1] == JUDGING:
                    job.judging = True
                    job.deadline = time.monotonic() + judge_seconds + 5
                continue
            del running[fd]
            on_result(job.index, _finish(job, None))
        now = time.monotonic()
        for fd, job in list(running.items()):
            if now > job.deadline:
                del running[fd]
                why = (f"judging its values ran past {judge_seconds:g} s" if job.judging
                       else f"ran past the time limit of {seconds:g} s")
                on_result(job.index, _finish(job, why))


def _close_quietly(fd) -> None:
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


def _finish(job: _Running, killed_because: str | None):
    """Reap a worker (killing it first when it is past its deadline), close its slot; its result or why not."""
    if killed_because is not None:
        try:
            os.kill(job.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _, status = os.waitpid(job.pid, 0)
    os.close(job.fd)
    try:
        job.slot.close()
    except Exception:  # noqa: BLE001 - cleaning up never stops the class
        traceback.print_exc()
    if killed_because is not None:
        return WorkerFailed(killed_because)
    data = bytes(job.buffer[1:] if job.judging else job.buffer)
    if data[:1] == RESULT:
        try:
            return json.loads(data[1:])
        except ValueError:
            pass
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if job.judging and sig in (signal.SIGXCPU, signal.SIGKILL):
            return WorkerFailed("judging its values ran past the grader's limits (CPU time or memory)")
        return WorkerFailed(f"the grader's worker for it ended by signal {sig}")
    return WorkerFailed("the grader's worker for it ended without a result (see the grader's output)")


def _worker(work, task, slot, fd: int, judge_seconds: float, judge_memory_mb: int) -> None:
    """The forked worker: run ``work``, write its result, exit without cleanup of the parent's objects."""
    code = 0
    try:
        _die_with_parent()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)

        def start_judging():
            os.write(fd, JUDGING)
            judging_limits(judge_seconds, judge_memory_mb)

        data = RESULT + json.dumps(work(task, slot, start_judging)).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BaseException:  # noqa: BLE001 - the parent reports a worker without a result
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
