"""Grading submitted assignment notebooks without trusting them (``tools/assignments.py grade``).

The pieces, in the order a submission meets them:

* ``spec.py``: what ``build`` stores for the instructor (``autograder/grading.json``): per exercise, its checks
  and the variables each check reads; the chapter's reference code.
* ``gradebook.py``: lists the files, reads each notebook defensively, picks the instructor's assignment, flags
  duplicates, writes the CSV (atomically, formulas neutralised).
* ``sandbox.py``: runs the submission's code cells under bubblewrap (unprivileged, no network, read-only
  allow-listed files, private /tmp, limits on time, memory, processes), or without it after a loud warning;
  ``limits.py`` makes the memory and process limits hold per submission (a cgroup, a user id of its own, a
  watchdog).
* ``pool.py``: grades several submissions at once, each in a worker process with deadlines for running and for
  judging.
* ``driver.py``: the only grading code next to the submission's: runs the cells, calls the requested functions
  on the grader's inputs, sends the values and outputs back on a pipe as data (JSON and raw array bytes, never
  pickle).
* ``values.py``: decodes that message strictly. ``judge.py``: runs the checks on a copy of the reference
  namespace holding the submission's values, in the grader's worker (never in the sandbox).
* ``reports.py``: the outputs beside the gradebook: feedback per submission, statistics per exercise, Canvas and
  Moodle imports.

CONTRIBUTING.md ("Assignments") says what this protects against and what it does not.
"""
from .gradebook import FIELDS, NotGradable, csv_cell, grade, student_id, write_gradebook  # noqa: F401
from .pool import default_jobs  # noqa: F401
from .sandbox import Limits, SandboxUnavailable, choose, probe  # noqa: F401
from .spec import SPEC_FILE, AssignmentSpec, make_spec  # noqa: F401
