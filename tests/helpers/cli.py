"""The ``castable`` command run inside the test's process, through the entry point the installed
command calls (``castable.cli:main``: its one-line errors and exit statuses included), with its
output piped: what the command does, without an interpreter start per command."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence

from castable.cli import main


@contextlib.contextmanager
def _as_a_process(args: Sequence[str], columns: int) -> Iterator[None]:
    """``sys.argv``, a narrow terminal's ``COLUMNS`` and the SIGINT handler the entry point
    installs, each restored afterwards."""
    argv, width, handler = sys.argv, os.environ.get("COLUMNS"), signal.getsignal(signal.SIGINT)
    sys.argv = ["castable", *args]
    os.environ["COLUMNS"] = str(columns)
    try:
        yield
    finally:
        sys.argv = argv
        signal.signal(signal.SIGINT, handler)
        if width is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = width


def _exit_status(code: object, err: io.TextIOBase) -> int:
    """The status a process ends with on ``SystemExit(code)``: a message is printed and means 1."""
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=err)
    return 1


def in_process(args: Sequence[str], columns: int = 40) -> subprocess.CompletedProcess[str]:
    """Run ``castable ARGS`` here with stdout and stderr piped (neither a terminal; stdout has a
    binary buffer, as a pipe has) and answer as :func:`subprocess.run` does."""
    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", write_through=True)
    err = io.TextIOWrapper(err_bytes, encoding="utf-8", write_through=True)
    with _as_a_process(args, columns), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main()
            status = 0
        except SystemExit as e:
            status = _exit_status(e.code, err)
    return subprocess.CompletedProcess(
        ["castable", *args], status, out_bytes.getvalue().decode(), err_bytes.getvalue().decode()
    )
