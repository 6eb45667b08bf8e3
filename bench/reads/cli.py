"""The first hour's waits, side by side with deltalake's Python: ``castable --version`` and
``--help``, a one-file append from the command line (and the same append from Python), and
``make demo`` from a fresh clone against a fresh venv that installs deltalake and writes a table.

Each command is a new process, as a user runs it, timed from start to exit; the commands of one
row run in turn, repeat after repeat, so they share the machine's state. The code is compiled
first, as ``pip install`` compiles a wheel. The targets: ``--version`` within 0.3 s,
a one-file append within 1 s, ``make demo`` within 2 minutes.

Usage: python -m bench cli [--repeats 7] [--demo-repeats 3] [--quick]
Writes bench/results/cli.md as well as printing it.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import castable
from bench.common.benchlib import ROOT, fmt_s, log, publish, report_header

BIN = Path(sys.executable).parent
BARE = ROOT / ".venv-demo" / "bin"
"""``make demo``'s venv: castable alone, without pandas (which pyarrow imports when it is there)."""
UV = ROOT / ".tools" / "uv" / "bin" / "uv"
TARGETS = {"castable --version": 0.3, "castable append (one file)": 1.0, "make demo, fresh clone": 120.0}


def wall(command: list[str], cwd: Path, env: dict[str, str]) -> float:
    """Seconds from start to exit of ``command``; it must succeed."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr[-2000:]}")
    return elapsed


def side_by_side(rows: dict[str, list[str]], repeats: int, cwd: Path, env: dict[str, str]) -> dict[str, float]:
    """The median wall time of each command, the commands run in turn ``repeats`` times."""
    times: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(repeats):
        for name, command in rows.items():
            times[name].append(wall(command, cwd, env))
    return {name: statistics.median(t) for name, t in times.items()}


def python(code: str, interpreter: Path = BIN / "python") -> list[str]:
    return [str(interpreter), "-c", code]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--demo-repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="2 repeats, 1 demo: a smoke run")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    repeats, demo_repeats = (2, 1) if args.quick else (args.repeats, args.demo_repeats)
    compileall.compile_dir(ROOT / "src", quiet=1)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    lines = report_header(
        "command-line benchmark",
        f"`python -m bench cli --repeats {repeats} --demo-repeats {demo_repeats}`: medians of wall time, "
        "each command a new process.",
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rows = pa.table({"id": pa.array(range(1_000), pa.int64()), "amount": pa.array([1.5] * 1_000)})
        pq.write_table(rows, work / "one.parquet")
        castable.create_table(str(work / "t"), rows.schema)
        castable.create_table(str(work / "bare"), rows.schema)
        starts = {
            "castable --version": [str(BIN / "castable"), "--version"],
            "castable --help": [str(BIN / "castable"), "--help"],
            "deltalake: import, print version": python("import deltalake; print(deltalake.__version__)"),
            "python -c pass (the floor)": python("pass"),
        }
        appends = {
            "castable append (one file)": [str(BIN / "castable"), "append", "t", "one.parquet"],
            "castable, Python: open_table().append": python(
                "import castable, pyarrow.parquet as pq; castable.open_table('t').append(pq.read_table('one.parquet'))"
            ),
            "deltalake, Python: write_deltalake(mode='append')": python(
                "import deltalake, pyarrow.parquet as pq; "
                "deltalake.write_deltalake('d', pq.read_table('one.parquet'), mode='append')"
            ),
        }
        if (BARE / "castable").exists():
            appends["castable append, bare install (no pandas)"] = [
                str(BARE / "castable"),
                "append",
                "bare",
                "one.parquet",
            ]
        log(f"starts and appends, {repeats} repeats")
        measured = side_by_side(starts, repeats, work, env) | side_by_side(appends, repeats, work, env)
        log(f"make demo from a fresh clone, {demo_repeats} repeats")
        measured |= demo(work, demo_repeats, env)
    lines += ["| command | median | ratio to deltalake's |", "| --- | ---: | ---: |"]
    peers = {
        "castable --version": "deltalake: import, print version",
        "castable --help": "deltalake: import, print version",
        "castable append (one file)": "deltalake, Python: write_deltalake(mode='append')",
        "castable, Python: open_table().append": "deltalake, Python: write_deltalake(mode='append')",
        "castable append, bare install (no pandas)": "deltalake, Python: write_deltalake(mode='append')",
        "make demo, fresh clone": "deltalake: fresh venv, install, write a table",
    }
    for name, seconds in measured.items():
        peer = peers.get(name)
        ratio = f"{seconds / measured[peer]:.2f}x" if peer in measured else ""
        lines.append(f"| {name} | {fmt_s(seconds)} | {ratio} |")
    lines += ["", "## Targets", ""]
    for name, target in TARGETS.items():
        verdict = "**met**" if measured[name] <= target else "**missed**"
        lines.append(f"- {name} within {fmt_s(target)}: {fmt_s(measured[name])}, {verdict}")
    lines += [
        "",
        "The dev venv has pandas, which pyarrow imports the first time it converts a Python value (any write "
        "does): the bare install's append shows the command without it. `make demo` includes creating its "
        "venv and installing castable into it (uv, its cache warm); deltalake's row installs deltalake and "
        "writes a 3-row table the same way.",
    ]
    publish("cli", lines, *(() if args.out is None else (args.out,)))


def demo(work: Path, repeats: int, env: dict[str, str]) -> dict[str, float]:
    """``make demo`` in a fresh clone, against a fresh venv that installs deltalake and uses it."""
    script = (
        "import deltalake, pyarrow as pa; deltalake.write_deltalake('d', pa.table({'id': [1, 2, 3]})); "
        "print(deltalake.DeltaTable('d').version())"  # reading rows back aborts deltalake 1.6.6 at exit, at times
    )
    times: dict[str, list[float]] = {"make demo, fresh clone": [], "deltalake: fresh venv, install, write a table": []}
    for i in range(repeats):
        clone = work / f"clone-{i}"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        (clone / ".tools").mkdir()
        os.symlink(ROOT / ".tools" / "uv", clone / ".tools" / "uv")  # uv itself, as a user has it installed
        times["make demo, fresh clone"].append(wall(["make", "demo"], clone, env))
        peer = work / f"peer-{i}"
        start = time.perf_counter()
        subprocess.run([str(UV), "venv", "--quiet", str(peer / "venv")], check=True, env=env)
        subprocess.run(
            [
                str(UV),
                "pip",
                "install",
                "--quiet",
                "--python",
                str(peer / "venv" / "bin" / "python"),
                "deltalake[pyarrow]",
            ],
            check=True,
            env={**env, "VIRTUAL_ENV": ""},
        )
        subprocess.run([str(peer / "venv" / "bin" / "python"), "-c", script], cwd=peer, check=True, env=env)
        times["deltalake: fresh venv, install, write a table"].append(time.perf_counter() - start)
        shutil.rmtree(clone)
        shutil.rmtree(peer)
    return {name: statistics.median(t) for name, t in times.items()}


if __name__ == "__main__":
    main()
