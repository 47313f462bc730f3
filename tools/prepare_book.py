"""Step 1 of `make book`: train the models the chapters load, in the terminal, with a progress bar.

Chapter 9 (and chapter 11, which looks inside the same model) load the run in ``runs/multi30k`` that this
script trains with the recommended configuration (``tmlib.training.experiment.RECOMMENDED``: a 15-minute budget). The
book build then only loads it, so the long step is visible here instead of hidden behind "Executing
notebook". An interrupted run (Ctrl-C) is saved and continued the next time; a finished run is reused.

    python tools/prepare_book.py            # what `make book` runs first
    TMLIB_SMOKE=1 make book                 # skip training: the chapters train a smoke model in seconds
    TMLIB_RUN_DIR=/path/to/run make book    # use another finished run

Exit status: 0 ready, 2 a user or data error (one ``error:`` line), 130 interrupted (the checkpoint is saved).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    from tmlib.training import CHECKPOINT_NAME, CheckpointError, load_checkpoint
    from tmlib.data import DataError, check_multi30k
    from tmlib.training import default_run, run_training
    from tmlib.training.stops import sigterm_interrupts
    from tmlib.training.config import ConfigError
    from tmlib.training.outcome import describe_divergence, describe_interruption
    from tmlib.training.stops import Diverged
    from tmlib.training.rundir import RunFolderError
    from tmlib.machine import describe_machine
    from tmlib.utils import smoke_mode

    if smoke_mode():
        print("make book: TMLIB_SMOKE=1, no training here (chapters 9 and 11 train a smoke model in seconds; "
              "their numbers are then meaningless)")
        return 0
    run_dir, config = default_run(root=ROOT)
    ckpt = run_dir / CHECKPOINT_NAME
    state = None
    if ckpt.is_file():
        try:
            state = load_checkpoint(ckpt)
        except CheckpointError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        if state.get("finished"):
            print(f"make book: step 1/2, the chapter 9 model: using the finished run in {run_dir} "
                  f"({state['step']:,} steps, {state['elapsed_s'] / 60:.1f} min); delete it to train again")
            return 0
    minutes = config.max_minutes
    print(f"make book: step 1/2, training the chapter 9 translator into {run_dir}\n"
          f"  budget: {minutes:g} minutes of training (plus about a minute of data preparation) on this machine:\n"
          f"  {describe_machine()}\n"
          "  Ctrl-C stops safely (the run continues the next time). To skip it: TMLIB_SMOKE=1 make book (a smoke\n"
          "  model trained in seconds, meaningless numbers), or TMLIB_RUN_DIR=<a finished run> make book."
          + (f"\n  continuing the interrupted run at step {state['step']:,}" if state else ""), flush=True)
    try:
        check_multi30k(None, ("train", "val"))
        start = time.perf_counter()
        with sigterm_interrupts():
            trainer = run_training(config, run_dir, resume=state is not None)
    except (DataError, ConfigError, RunFolderError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Diverged as err:
        print(f"error: {describe_divergence(err, config, run_dir)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: the next `make book` continues a saved run
        message = describe_interruption(stop, run_dir, "python -m tmlib.train")
        print(f"\nmake book: {message} (or run `make book` again)", file=sys.stderr)
        return 128 + int(getattr(stop, "signum", 2))
    h = trainer.history
    print(f"make book: trained {trainer.step:,} steps ({trainer.epoch} epochs) in {(time.perf_counter() - start) / 60:.1f}"
          f" min; validation cross-entropy {h['val_nll'][-1]:.3f} nats/token", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
