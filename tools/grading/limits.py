"""Limits per submission, not per process: a cgroup for its memory and processes, a user id of its own, a watchdog.

``setrlimit`` limits one process (``RLIMIT_AS``) or one user id on the whole host (``RLIMIT_NPROC``): three child
processes of 1.2 GB each pass a 2 GB address-space limit, and one submission holding its processes (or a second
grader running at the same time) starves the next one of its own. So each submission gets, from this module:

* **a cgroup** of its own when the kernel offers one here (cgroup v2 where this process may create a child with the
  memory and pids controllers, as root on a host or in a container whose cgroup is delegated; cgroup v1 memory and
  pids hierarchies as root): ``memory.max`` (v1 ``memory.limit_in_bytes`` and ``memsw``) for all its processes
  together, ``pids.max`` for its processes and threads; the kernel enforces both, and an out-of-memory kill in the
  cgroup ends the whole submission (``memory.oom.group``, or the watchdog on v1). Its peak memory is read back.
* **a user id of its own** when the grader runs as root (``setpriv`` drops to ``UID_BASE + k``; a lock file per id
  keeps two graders on one host apart), so ``RLIMIT_NPROC`` counts that submission's processes only.
* **a watchdog** (:class:`MemoryWatch`) where there is no cgroup: it sums the proportional memory (PSS) of the
  submission's processes every 0.1 s, records the peak and kills them all past the limit.

What this does not cover: without a cgroup the watchdog samples, so a burst shorter than its period can pass the
limit (each process is still held to ``RLIMIT_AS``), and memory the kernel spends on the submission's behalf (page
tables, socket buffers) is not counted; without root, the submission runs under the grader's own user id, so
``RLIMIT_NPROC`` is the grader's own count plus the limit and two graders of one user still share it.
"""
from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

UID_BASE = 200_000_000   # far above login users and the usual subordinate-id ranges (100000-165535)
UID_SLOTS = 4096
LOCK_DIR = Path("/run/lock/tm-grade-uids") if Path("/run/lock").is_dir() else Path("/tmp/tm-grade-uids")
PERIOD = 0.1             # watchdog period, seconds
_COUNTER = [0]


# --------------------------------------------------------------------------------------------- cgroups
def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _mounts() -> dict[str, Path]:
    """Mount points of the cgroup filesystems: ``{"v2": path, "memory": path, "pids": path}`` (those present)."""
    out: dict[str, Path] = {}
    for line in (_read(Path("/proc/self/mountinfo")) or "").splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        point = Path(fields[4].replace("\\040", " "))
        if tail[0] == "cgroup2":
            out.setdefault("v2", point)
        elif tail[0] == "cgroup":
            for option in tail[2].split(","):
                if option in ("memory", "pids"):
                    out.setdefault(option, point)
    return out


def _own_paths() -> dict[str, str]:
    """This process's cgroup path per hierarchy: ``{"v2": "/a/b", "memory": "/x", "pids": "/"}``."""
    out = {}
    for line in (_read(Path("/proc/self/cgroup")) or "").splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if number == "0" and controllers == "":
            out["v2"] = path
        for name in controllers.split(","):
            if name in ("memory", "pids"):
                out[name] = path
    return out


@dataclass
class Cgroup:
    """One submission's cgroup: ``dirs`` is ``[unified dir]`` (v2) or ``[memory dir, pids dir]`` (v1)."""
    version: int
    dirs: list[Path]
    limit_bytes: int
    sampled_peak: int = 0

    @property
    def memory(self) -> Path:
        return self.dirs[0]

    def enter(self) -> None:
        """Move the calling process into the cgroup (called in the sandbox's process before it starts)."""
        for d in self.dirs:
            (d / "cgroup.procs").write_text(str(os.getpid()))

    def usage(self) -> int:
        name = "memory.current" if self.version == 2 else "memory.usage_in_bytes"
        text = _read(self.memory / name)
        value = int(text) if text and text.strip().isdigit() else 0
        self.sampled_peak = max(self.sampled_peak, value)
        return value

    def peak(self) -> int:
        """The most memory the cgroup held (the kernel's own peak where it keeps one, else the sampled one)."""
        text = _read(self.memory / ("memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"))
        return max(int(text), self.sampled_peak) if text and text.strip().isdigit() else self.sampled_peak

    def oom_kills(self) -> int:
        text = _read(self.memory / ("memory.events" if self.version == 2 else "memory.oom_control")) or ""
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0

    def pids(self) -> list[int]:
        out = set()
        for d in self.dirs:
            out.update(int(p) for p in (_read(d / "cgroup.procs") or "").split() if p.isdigit())
        return sorted(out)

    def kill(self) -> None:
        """SIGKILL every process in the cgroup (``cgroup.kill`` where the kernel has it), until none is left."""
        if self.version == 2 and (self.memory / "cgroup.kill").exists():
            try:
                (self.memory / "cgroup.kill").write_text("1")
            except OSError:
                pass
        kill_until_gone(self.pids)

    def remove(self) -> None:
        self.kill()
        for d in self.dirs:
            for _ in range(100):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def _v2_parent(mounts, own) -> Path | None:
    """A v2 cgroup under which this process may create children with memory and pids controllers, or None."""
    if "v2" not in mounts or "v2" not in own:
        return None
    mine = mounts["v2"] / own["v2"].lstrip("/")
    for candidate in (mine, mine.parent if own["v2"] not in ("", "/") else None):
        if candidate is None:
            continue
        enabled = (_read(candidate / "cgroup.subtree_control") or "").split()
        if {"memory", "pids"} <= set(enabled) and os.access(candidate, os.W_OK):
            return candidate
    return None


_SUPPORT: dict[str, object] = {}


def cgroup_support() -> tuple[str, object]:
    """How submissions get cgroups here: ``("v2", parent dir)``, ``("v1", (memory dir, pids dir))``, or
    ``("none", reason)``; probed once per process by creating and removing a cgroup. ``TM_GRADE_CGROUP=0``
    turns cgroups off (the tests use it to exercise the watchdog)."""
    if "result" in _SUPPORT:
        return _SUPPORT["result"]  # type: ignore[return-value]
    result: tuple[str, object] = ("none", "no cgroup this process may create (not root, or none delegated)")
    if os.environ.get("TM_GRADE_CGROUP") == "0":
        result = ("none", "cgroups turned off (TM_GRADE_CGROUP=0)")
    else:
        mounts, own = _mounts(), _own_paths()
        parent = _v2_parent(mounts, own)
        candidates = []
        if parent is not None:
            candidates.append(("v2", parent))
        if "memory" in mounts and "pids" in mounts and "memory" in own and "pids" in own:
            candidates.append(("v1", (mounts["memory"] / own["memory"].lstrip("/"),
                                      mounts["pids"] / own["pids"].lstrip("/"))))
        for kind, where in candidates:
            try:
                probe = _make(kind, where, f"tm-grade-probe-{os.getpid()}", 64 * 2**20, 16)
            except OSError:
                continue
            try:  # a process must be able to enter it (a cgroup v2 with processes of its own refuses children)
                subprocess.run(["true"], preexec_fn=probe.enter, check=True, timeout=30)
                entered = True
            except (OSError, subprocess.SubprocessError):
                entered = False
            probe.remove()
            if entered:
                result = (kind, where)
                break
    _SUPPORT["result"] = result
    return result


def _make(kind: str, where, name: str, limit_bytes: int, pids: int) -> Cgroup:
    """Create and configure one cgroup (raises ``OSError`` where that is not allowed)."""
    if kind == "v2":
        d = Path(where) / name
        d.mkdir()
        group = Cgroup(2, [d], limit_bytes)
        try:
            (d / "memory.max").write_text(str(limit_bytes))
            if (d / "memory.swap.max").exists():
                (d / "memory.swap.max").write_text("0")
            if (d / "memory.oom.group").exists():
                (d / "memory.oom.group").write_text("1")
            (d / "pids.max").write_text(str(pids))
        except OSError:
            group.remove()
            raise
        return group
    memory_root, pids_root = where
    dirs = [Path(memory_root) / name, Path(pids_root) / name]
    made = []
    try:
        for d in dirs:
            d.mkdir()
            made.append(d)
        (dirs[0] / "memory.limit_in_bytes").write_text(str(limit_bytes))
        if (dirs[0] / "memory.memsw.limit_in_bytes").exists():
            (dirs[0] / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
        (dirs[1] / "pids.max").write_text(str(pids))
    except OSError:
        Cgroup(1, made, limit_bytes).remove()
        raise
    return Cgroup(1, dirs, limit_bytes)


def new_cgroup(limit_bytes: int, pids: int) -> Cgroup | None:
    """A fresh cgroup for one submission, or None where :func:`cgroup_support` found none."""
    kind, where = cgroup_support()
    if kind == "none":
        return None
    _COUNTER[0] += 1
    try:
        return _make(kind, where, f"tm-grade-{os.getpid()}-{_COUNTER[0]}", limit_bytes, pids)
    except OSError:
        return None


# --------------------------------------------------------------------------------------------- user ids
@dataclass
class UserSlot:
    """A user id reserved for one submission (by an exclusive lock on ``LOCK_DIR/<uid>``)."""
    uid: int
    lock_fd: int

    def release(self) -> None:
        kill_user(self.uid)
        try:
            os.close(self.lock_fd)
        except OSError:
            pass


def reserve_uid() -> UserSlot:
    """Reserve a user id no other submission (of this grader or another) is using now. Root only.

    Raises:
        RuntimeError: all ``UID_SLOTS`` ids are in use.
    """
    LOCK_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    start = (os.getpid() * 7919 + _COUNTER[0]) % UID_SLOTS
    for k in range(UID_SLOTS):
        uid = UID_BASE + (start + k) % UID_SLOTS
        fd = os.open(LOCK_DIR / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        if user_processes(uid):  # left over by a grader that died: clean up, then use it
            kill_user(uid)
        _COUNTER[0] += 1
        return UserSlot(uid, fd)
    raise RuntimeError(f"all {UID_SLOTS} sandbox user ids are in use")


def user_processes(uid: int) -> list[int]:
    """The processes that run as ``uid`` now."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                out.append(int(pid))
        except OSError:
            pass
    return out


def kill_until_gone(list_pids) -> None:
    """SIGKILL every process ``list_pids()`` returns, again until it returns none (at most 100 rounds, 20 ms apart:
    a fork race is bounded by ``RLIMIT_NPROC``)."""
    for _ in range(100):
        pids = list_pids()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)


def kill_user(uid: int) -> None:
    """SIGKILL every process of ``uid`` until none is left."""
    kill_until_gone(lambda: user_processes(uid))


# --------------------------------------------------------------------------------------------- the watchdog
def descendants(root: int) -> list[int]:
    """``root`` and every process below it (by parent id)."""
    children: dict[int, list[int]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        stat = _read(Path(f"/proc/{pid}/stat"))
        if stat:
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(pid))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def process_memory(pid: int) -> int:
    """Proportional set size of a process in bytes (shared pages split among their users), else its RSS."""
    text = _read(Path(f"/proc/{pid}/smaps_rollup"))
    if text:
        for line in text.splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    statm = _read(Path(f"/proc/{pid}/statm"))
    return int(statm.split()[1]) * os.sysconf("SC_PAGE_SIZE") if statm else 0


@dataclass
class MemoryWatch:
    """Samples a submission's memory every ``PERIOD`` s in a thread; past ``limit_bytes`` it calls ``kill`` once.

    ``processes()`` lists the submission's processes (its user id's, or the sandbox's descendants); with a cgroup,
    the cgroup's own counters are read instead and the watch only turns an out-of-memory kill into the end of the
    whole submission.
    """
    limit_bytes: int
    processes: object
    kill: object
    cgroup: Cgroup | None = None
    peak: int = 0
    exceeded: bool = False
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _sample(self) -> None:
        if self.cgroup is not None:
            self.peak = max(self.peak, self.cgroup.usage())
            over = self.cgroup.oom_kills() > 0
        else:
            total = sum(process_memory(pid) for pid in self.processes())
            self.peak = max(self.peak, total)
            over = total > self.limit_bytes
        if over and not self.exceeded:
            self.exceeded = True
            self.kill()

    def _loop(self) -> None:
        while not self._stop.wait(PERIOD):
            try:
                self._sample()
            except Exception:  # noqa: BLE001 - a process that vanished mid-read: sample again
                pass

    def start(self) -> "MemoryWatch":
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self._sample()
        except Exception:  # noqa: BLE001
            pass
        if self.cgroup is not None:
            self.peak = max(self.peak, self.cgroup.peak())
