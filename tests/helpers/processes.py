"""How the multi-process tests start their processes: forked from a server that imported
castable and the workers' code (helpers/workers.py) once, instead of each spawned process
importing them again (about a second of CPU each, on two cores shared by eight writers). Each
is still a process of its own: its own memory, its own S3 clients and turns, and killable."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

PROCESSES = multiprocessing.get_context("forkserver")
PROCESSES.set_forkserver_preload(["helpers.workers"])


def process_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` processes, each running one worker of helpers/workers.py at a time."""
    return ProcessPoolExecutor(workers, mp_context=PROCESSES)
