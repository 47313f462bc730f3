"""Run the numerical equivalence tests once more under each CPU kernel path PyTorch has on this machine.

    python tools/kernels.py                 # `make kernels` (part of `make test`)
    python tools/kernels.py avx2 -- -x -k attention

The tests marked ``numerics`` (the NumPy references, attention, the layers, the model against ``nn.Transformer``,
the trainer's step against a hand-written one) run with ``ATEN_CPU_CAPABILITY`` set to each of ``default``
(scalar code), ``avx2`` and ``avx512``: the vectorised kernels of PyTorch round in other orders on each, and a
student's CPU may have any of them, so a tolerance tuned to one path fails on another (issue 29). NumPy's own
runtime dispatch (the references' exp, log, tanh differ by an ulp or two between its paths) follows:
``NPY_DISABLE_CPU_FEATURES`` turns off its AVX2 and AVX-512 code for ``default`` and its AVX-512 code for
``avx2``. A capability above this CPU's own (the one PyTorch picks with the variable unset) is skipped, and said
so: PyTorch honours the variable without checking the CPU (torch 2.13 reports ``AVX512`` when asked for it on an
AVX2-only CPU, then dies of an illegal instruction in the first vectorised kernel). The tolerances are those of ``tmlib/tolerance.py`` (see CONTRIBUTING.md, "Tolerances").

Exit status: 0 every run passed (or was skipped), 1 a run failed, 2 bad arguments.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CAPABILITIES = ("default", "avx2", "avx512")  # in increasing order: each CPU that has one has those before it
#: NumPy 2's dispatch targets to turn off with each capability (names it does not know are ignored).
NUMPY_DISABLED = {"default": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR", "avx2": "X86_V4 AVX512_ICL AVX512_SPR",
                  "avx512": ""}


def numerics_files() -> list[str]:
    """The test files that hold tests marked ``numerics`` (collecting only those keeps each run short)."""
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_*.py")
                  if "mark.numerics" in p.read_text(encoding="utf-8"))


def capability_under(requested: str) -> str:
    """The kernel path PyTorch picks with ``ATEN_CPU_CAPABILITY=requested`` (e.g. ``"AVX2"``), by asking it."""
    env = {**os.environ, "ATEN_CPU_CAPABILITY": requested}
    if not requested:  # unset, not empty (PyTorch warns about an empty value)
        env.pop("ATEN_CPU_CAPABILITY")
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def supported(cap: str, native: str) -> bool:
    """Whether a CPU whose own kernel path is ``native`` (e.g. ``"AVX2"``) can run the path ``cap``: paths up to its
    own in the order of CAPABILITIES; on a CPU outside that order (an Arm CPU's ``"SVE256"``, say) only ``default``."""
    order = [c.upper() for c in CAPABILITIES]
    if native.upper() not in order:
        return cap == "default"
    return order.index(cap.upper()) <= order.index(native.upper())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capabilities", nargs="*", metavar="{default,avx2,avx512}",
                        help="the paths to run (default: all three)")
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.capabilities = args.capabilities or list(CAPABILITIES)
    unknown = sorted(set(args.capabilities) - set(CAPABILITIES))
    if unknown:
        parser.error(f"unknown capability {', '.join(unknown)}: choose from {', '.join(CAPABILITIES)}")
    native = capability_under("")  # the CPU's own, whatever the caller's environment asks for
    print(f"kernels: this CPU's own path is {native}; running the numerics tests under "
          f"ATEN_CPU_CAPABILITY={', '.join(args.capabilities)}", flush=True)
    failed, start = [], time.perf_counter()
    for cap in args.capabilities:
        if not supported(cap, native):
            print(f"kernels: ATEN_CPU_CAPABILITY={cap} skipped: this CPU's own path is {native}, below "
                  f"{cap.upper()} (PyTorch would try {cap.upper()} kernels and stop on an illegal instruction)",
                  flush=True)
            continue
        got = capability_under(cap)
        if got.lower() != cap.lower():
            print(f"kernels: ATEN_CPU_CAPABILITY={cap} skipped: PyTorch runs {got} when asked for it", flush=True)
            continue
        t0 = time.perf_counter()
        env = {**os.environ, "ATEN_CPU_CAPABILITY": cap, "NPY_DISABLE_CPU_FEATURES": NUMPY_DISABLED[cap]}
        rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "numerics",
                              *numerics_files(), *extra], cwd=ROOT, env=env)
        print(f"kernels: ATEN_CPU_CAPABILITY={cap}: {'passed' if rc == 0 else 'FAILED'} in "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
        if rc != 0:
            failed.append(cap)
    print(f"kernels: {len(args.capabilities)} paths in {time.perf_counter() - start:.0f} s"
          + (f"; failed under {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
