"""Running a submission's code: in a bubblewrap sandbox, or (with a loud warning) without one.

With ``bwrap`` (Debian's ``bubblewrap``), the extraction driver runs

* as an unprivileged user: when the grader runs as root, bwrap sets up the mounts and ``setpriv`` then drops to
  a user id of the submission's own (``limits.UID_BASE + k``, reserved while it runs) with no capabilities, no
  supplementary groups and ``no_new_privs``; otherwise bwrap runs as the grader's user in a new user namespace, as
  uid 65534 inside;
* in new PID, network (no interface but a down loopback), IPC, UTS and cgroup namespaces, in a new session;
  ``--die-with-parent`` and the PID namespace make every process of the submission die with the sandbox,
  detached or not;
* on an allow-list of read-only mounts: ``/usr``, ``/etc``, the ``/bin``/``/lib*`` links, the Python installation
  and virtual environment, the ``tmlib`` package (alone, at ``/grader/lib/tmlib``), the driver's folder (the
  driver and the job: the submission's code cells and the names to send back) and any ``--expose`` path. Nothing
  else of the host exists inside: not the repository (notebooks, solutions, hidden tests, ``_build``), not the
  instructor's assignments and autograder archives, not the other submissions, not the gradebook, not ``/root``
  or ``/home``. ``/`` is read-only; ``/tmp`` and ``/dev/shm`` are private tmpfs of bounded size, the only
  writable places;
* under resource limits (:class:`Limits`), per submission: wall-clock time (the whole sandbox is killed), memory
  and processes of all its processes together (a cgroup of its own, or its own user id and a watchdog, see
  ``limits.py``), and per process CPU time, address space, file size, no core dumps; ``OMP_NUM_THREADS=1`` and
  friends.

Values come back on a pipe (a file descriptor that survives into the sandbox); nothing is written to the host.

Without a working bwrap (bwrap missing, or unable to create namespaces) :func:`choose` refuses to grade, and says how
to install bubblewrap, unless the instructor asked for no sandbox (``mode="none"``: ``--no-sandbox`` or ``--sandbox
none``). The driver then still runs in a separate process under the same limits, in a private temporary folder, so
the judging stays outside the submission's process; but the submission can read every file the grader's user can
read (the hidden tests among them), use the network, and leave detached processes behind. :func:`choose` prints a
warning saying so.
"""
from __future__ import annotations

import importlib.util
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from . import limits as L

NOBODY = 65534
SYSTEM_DIRS = ("/usr", "/etc")
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
TAIL_BYTES = 20_000
SHM_BYTES = 64 * 2**20  # /dev/shm (torch's shared memory), like /tmp a private bounded tmpfs
WARNING = """\
WARNING: {reason}.
WARNING: Submissions will run WITHOUT A SANDBOX: as {user}, able to read every file {user} can read (the hidden
WARNING: tests, the autograder archives, the other submissions), to use the network and to leave processes behind.
WARNING: Their answers are still judged in the grader's own process. Install bubblewrap (apt-get install bubblewrap)
WARNING: and leave out --no-sandbox to sandbox them."""
REFUSAL = """\
no sandbox: {reason}. The grader will not run submissions without one, since their code could then read the hidden
tests and the other submissions. Install bubblewrap (Debian, Ubuntu, WSL 2: sudo apt-get install bubblewrap;
Fedora: sudo dnf install bubblewrap) and check that `bwrap --ro-bind / / true` runs (in a container, bwrap also needs
user namespaces). Or, accepting that risk, grade without a sandbox: --no-sandbox (make grade: GRADE_FLAGS=--no-sandbox)."""


class SandboxUnavailable(RuntimeError):
    """``mode="bwrap"`` was asked for but bwrap is missing or does not work here (the message says why)."""


@dataclass(frozen=True)
class Limits:
    """Per-submission limits: wall-clock seconds, memory of all its processes together, processes and threads
    together, file size, private /tmp; and the time and extra memory the grader may spend judging its values."""
    seconds: float = 300.0
    memory_mb: int = 4096
    processes: int = 64
    file_mb: int = 256
    tmp_mb: int = 512
    judge_seconds: float = 60.0
    judge_memory_mb: int = 2048


@dataclass
class Outcome:
    """How a run ended: exit status (None if killed by the grader), time, output tail and the values message."""
    returncode: int | None
    timed_out: bool
    seconds: float
    output: str
    message: bytes
    overflow: bool  # the submission wrote more than a values message can hold to the values pipe
    peak_bytes: int = 0            # the most memory its processes held together
    memory_exceeded: bool = False  # killed for passing the memory limit (all its processes together)


@dataclass
class Slot:
    """What one submission gets for itself: a user id (root only), a cgroup (where the kernel offers one)."""
    user: L.UserSlot | None
    cgroup: L.Cgroup | None

    def close(self) -> None:
        """Kill whatever of the submission is left and give the user id and cgroup back."""
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.user is not None:
            self.user.release()


def _user_tasks(uid: int) -> int:
    """How many tasks (processes and threads) ``uid`` runs now (RLIMIT_NPROC counts them all)."""
    n = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                n += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            pass
    return n


def tmlib_dir() -> Path | None:
    """The ``tmlib`` package the grader itself would import (the sandbox gets the same code)."""
    spec = importlib.util.find_spec("tmlib")
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


class Sandbox:
    """Runs ``python driver.py job.json`` for one submission; ``kind`` is ``"bwrap"`` or ``"none"``."""

    def __init__(self, kind: str, expose: tuple[str, ...] = ()):
        self.kind, self.expose = kind, tuple(str(Path(p).resolve()) for p in expose)
        self.as_root = os.geteuid() == 0
        self.bwrap = shutil.which("bwrap") if kind == "bwrap" else None
        self.setpriv = shutil.which("setpriv") if self.as_root else None

    def _python_paths(self) -> list[str]:
        paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                 str(Path(os.path.realpath(sys.executable)).parent.parent)}
        out = []
        for p in sorted(os.path.abspath(p) for p in paths):
            if p != "/" and not any(p == d or p.startswith(d + "/") for d in (*SYSTEM_DIRS, *out)):
                out.append(p)
        return out

    def shown(self, path: Path) -> str | None:
        """The bound folder through which ``path`` would be visible inside the sandbox, or None."""
        if self.kind != "bwrap":
            return None
        lib = tmlib_dir()
        real = os.path.realpath(path)
        for src in (*SYSTEM_DIRS, *self._python_paths(), *self.expose, *([str(lib)] if lib else [])):
            src = os.path.realpath(src)
            if real == src or real.startswith(src.rstrip("/") + "/"):
                return src
        return None

    def _env(self, lib: str, mode: dict[str, str] | None = None) -> dict[str, str]:
        """The submission's whole environment; ``mode``: the chapter's quick-mode setting (``spec.mode_env``)."""
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", "PYTHONPATH": lib,
               "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1", "MPLBACKEND": "Agg",
               "MPLCONFIGDIR": "/tmp/.matplotlib", "XDG_CACHE_HOME": "/tmp/.cache", "IPYTHONDIR": "/tmp/.ipython",
               "USER": "student", "LOGNAME": "student", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "OPENBLAS_NUM_THREADS": "1"}
        env.update(mode or {})  # TMLIB_SMOKE: the grader's own setting, or the chapter's quick mode
        data = os.environ.get("TMLIB_DATA_DIR")
        if data:  # passed on when exposed, as the resolved path (the one bound in the sandbox), links followed
            real = os.path.realpath(data)
            if any(real == e or real.startswith(e.rstrip("/") + "/") for e in self.expose):
                env["TMLIB_DATA_DIR"] = real
        return env

    def command(self, indir: Path, limits: Limits, work: str | None = None,
                uid: int = NOBODY, mode: dict[str, str] | None = None) -> tuple[list[str], dict | None]:
        """The argv (and, without bwrap, the environment) that runs the driver on ``indir/job.json``.

        ``work`` is the private working folder of a run without bwrap (its HOME and temporary folder); ``uid`` the
        user id the driver runs as when the grader is root; ``mode`` the chapter's quick-mode variables.
        """
        lib = tmlib_dir()
        if self.kind == "none":
            env = self._env(str(lib.parent) if lib else "", mode)
            env.update(HOME=work or "", TMPDIR=work or "", MPLCONFIGDIR=f"{work}/.matplotlib",
                       XDG_CACHE_HOME=f"{work}/.cache", IPYTHONDIR=f"{work}/.ipython")
            return [sys.executable, str(indir / "driver.py"), str(indir / "job.json")], env
        binds = [(d, d) for d in (*SYSTEM_DIRS, *self._python_paths(), *self.expose) if os.path.isdir(d)]
        if lib is not None:
            binds.append((str(lib), "/grader/lib/tmlib"))
            records = lib.parent / "benchmarks" / "results"  # the stored benchmark records chapter 12 reads
            if records.is_dir():  # (tmlib.analysis.benchmarking.load_result looks beside the package)
                binds.append((str(records), "/grader/lib/benchmarks/results"))
        binds.append((str(indir), "/grader/in"))
        argv = [self.bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                "--unshare-cgroup-try", "--die-with-parent", "--new-session"]
        if not (self.as_root and self.setpriv):
            argv += ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY)]
        # The private /tmp and /dev/shm first: the binds below then stay visible when they lie under /tmp (a
        # course checked out or a virtual environment made in /tmp), instead of being hidden by the tmpfs.
        argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm",
                 "--perms", "1777", "--size", str(limits.tmp_mb * 2**20), "--tmpfs", "/tmp"]
        parents = sorted({str(p) for _, dst in binds for p in Path(dst).parents if str(p) != "/"})
        for parent in parents:  # bwrap would create them 0700: unreadable for uid 65534
            if not any(parent == d or parent.startswith(d + "/") for _, d in binds):
                argv += ["--perms", "0755", "--dir", parent]
        for link in SYSTEM_LINKS:
            if os.path.islink(link):
                argv += ["--symlink", os.readlink(link), link]
            elif os.path.isdir(link):
                argv += ["--ro-bind", link, link]
        for src, dst in binds:
            argv += ["--ro-bind", src, dst]
        argv += ["--remount-ro", "/", "--chdir", "/tmp", "--clearenv"]
        for key, value in self._env("/grader/lib", mode).items():
            argv += ["--setenv", key, value]
        argv.append("--")
        if self.as_root and self.setpriv:
            argv += [self.setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
                     "--inh-caps=-all", "--bounding-set=-all"]
        return argv + [sys.executable, "/grader/in/driver.py", "/grader/in/job.json"], None

    def _limit(self, limits: Limits, slot: Slot):
        """The child's cgroup and rlimits (called in the forked child before exec)."""
        if slot.cgroup is not None:
            slot.cgroup.enter()
        cpu = int(limits.seconds) + 5
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * 2**20,) * 2)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mb * 2**20,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if slot.user is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes,) * 2)  # for its own uid, after setpriv
        elif not self.as_root:
            n = self._tasks_now + limits.processes
            resource.setrlimit(resource.RLIMIT_NPROC, (n, n))

    def open_slot(self, limits: Limits) -> Slot:
        """Reserve what one submission gets for itself (see :class:`Slot`); give it back with ``slot.close()``."""
        user = L.reserve_uid() if self.kind == "bwrap" and self.as_root and self.setpriv else None
        try:
            cgroup = L.new_cgroup(limits.memory_mb * 2**20, limits.processes) if os.geteuid() == 0 else None
        except BaseException:
            if user is not None:
                user.release()
            raise
        return Slot(user, cgroup)

    def run(self, indir: Path, job: dict, limits: Limits, slot: Slot | None = None,
            mode: dict[str, str] | None = None) -> Outcome:
        """Write ``job`` (plus the pipe's descriptor) to ``indir/job.json``, run the driver, collect its output.

        The whole process group is killed at the time limit, past the memory limit and again after the run; with
        bwrap that also ends every process inside the sandbox (its PID namespace dies with it), and the slot's
        cgroup or user id catches the rest. ``slot`` (from :meth:`open_slot`) is closed by the caller; without one,
        a slot is opened and closed here. Never raises for what the submission does; ``OSError`` if the sandbox
        cannot be started at all.
        """
        if slot is None:
            slot = self.open_slot(limits)
            try:
                return self.run(indir, job, limits, slot, mode)
            finally:
                slot.close()
        import json
        from .values import MAX_MESSAGE_BYTES

        r, w = os.pipe()
        (indir / "job.json").write_text(json.dumps({**job, "fd": w}))
        for path in (indir / "job.json", indir / "driver.py"):
            path.chmod(0o644)  # readable by uid 65534 whatever the grader's umask
        indir.chmod(0o755)
        work = tempfile.mkdtemp(prefix="tm-grade-none-") if self.kind == "none" else None
        argv, env = self.command(indir, limits, work, slot.user.uid if slot.user else NOBODY, mode)
        self._tasks_now = _user_tasks(os.getuid()) if not self.as_root else 0
        start = time.monotonic()
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    pass_fds=(w,), start_new_session=True,
                                    preexec_fn=lambda: self._limit(limits, slot), umask=0o022, cwd=work, env=env)
        finally:
            os.close(w)

        def kill_all():
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if slot.cgroup is not None:
                slot.cgroup.kill()
            if slot.user is not None:
                L.kill_user(slot.user.uid)

        members = (lambda: L.user_processes(slot.user.uid)) if slot.user else (lambda: L.descendants(proc.pid))
        watch = L.MemoryWatch(limits.memory_mb * 2**20, members, kill_all, slot.cgroup).start()
        tail, message, overflow = bytearray(), bytearray(), [False]

        def read_tail():
            for chunk in iter(lambda: proc.stdout.read1(65536), b""):
                tail.extend(chunk)
                del tail[:-TAIL_BYTES]

        def read_message():
            with os.fdopen(r, "rb", buffering=0) as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    if len(message) + len(chunk) > MAX_MESSAGE_BYTES:
                        overflow[0] = True
                    else:
                        message.extend(chunk)

        readers = [threading.Thread(target=fn, daemon=True) for fn in (read_tail, read_message)]
        for t in readers:
            t.start()
        timed_out = False
        try:
            proc.wait(timeout=limits.seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            watch.stop()
            kill_all()
            proc.wait()
            for t in readers:
                t.join(timeout=5)  # without bwrap a detached child may hold the pipes open: do not wait for it
            if work:
                shutil.rmtree(work, ignore_errors=True)
        return Outcome(None if timed_out else proc.returncode, timed_out, time.monotonic() - start,
                       tail.decode(errors="replace"), bytes(message), overflow[0], watch.peak, watch.exceeded)


_PROBES: dict[tuple, str | None] = {}


def probe(expose: tuple[str, ...] = ()) -> str | None:
    """None when bwrap can run a Python in the sandbox here; otherwise why not (cached per process)."""
    if expose in _PROBES:
        return _PROBES[expose]
    box = Sandbox("bwrap", expose)
    if box.bwrap is None:
        reason = "bubblewrap (bwrap) is not installed"
    else:
        with tempfile.TemporaryDirectory(prefix="tm-grade-probe-") as d:
            Path(d, "driver.py").write_text("import json, os, sys\n"
                                            "os.write(json.load(open(sys.argv[1]))['fd'], b'ok')\n")
            try:
                out = box.run(Path(d), {}, Limits(seconds=60))
                reason = None if out.message == b"ok" else f"bwrap does not work here: {out.output.strip()[-300:]}"
            except OSError as err:
                reason = f"bwrap does not start: {err}"
    _PROBES[expose] = reason
    return reason


def choose(mode: str = "bwrap", expose: tuple[str, ...] = ()) -> Sandbox:
    """The sandbox to use: ``"bwrap"`` (the default: bubblewrap, or refuse) or ``"none"`` (no sandbox, with a
    warning); ``"auto"``, the old default, now means ``"bwrap"``.

    Raises:
        SandboxUnavailable: ``mode`` is ``"bwrap"`` or ``"auto"`` and :func:`probe` failed; the message says why,
            how to install bubblewrap, and that ``--no-sandbox`` grades without one.
        ValueError: an unknown mode.
    """
    if mode not in ("auto", "bwrap", "none"):
        raise ValueError(f"sandbox mode must be bwrap or none, got {mode!r}")
    if mode == "none":
        user = "root" if os.geteuid() == 0 else f"uid {os.geteuid()}"
        print(WARNING.format(reason="--no-sandbox was given", user=user), file=sys.stderr, flush=True)
        return Sandbox("none", tuple(expose))
    reason = probe(tuple(expose))
    if reason is not None:
        raise SandboxUnavailable(REFUSAL.format(reason=reason))
    return Sandbox("bwrap", tuple(expose))
