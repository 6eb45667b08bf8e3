"""Concurrent writers on one table: castable (local store and moto S3 over HTTP) against deltalake, in one run.

For each number of writer processes W, every process opens its own handle, waits for the others at a
barrier, then appends one-row batches to the same table with default settings, recording each commit's
outcome and latency. The window runs from the first writer's start to the last writer's end. Every run is
verified afterwards (each committed row present once, versions dense). castable-shaped is castable-moto behind
a proxy that answers each request 25 ms late, as S3 does; castable-moto-race and castable-shaped-race turn fair
turns off (``commit.fair-turns = false``), so the cost and the gain of fair turns show side by side. Then a stale
handle: one append through a handle opened before many commits by another handle.

Usage: python -m bench contention [--writers 4 6 8 16] [--commits 25] [--repeats 3]
       [--systems castable-local castable-moto castable-moto-race castable-shaped castable-shaped-race deltalake]
       [--quick] [--out DIR]
Writes DIR/contention.md and DIR/contention.png (DIR defaults to bench/results/).
"""

from __future__ import annotations

import argparse
import functools
import math
import multiprocessing as mp
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake import __version__ as deltalake_version

import castable
from bench.common.benchlib import RESULTS, fmt_s, moto_server, publish, report_header
from bench.common.shaped_s3 import shaping_proxy
from castable.format.layout import version_of_manifest_key

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("writer", pa.int32())])
LOCAL, MOTO, MOTO_RACE, DELTA = "castable-local", "castable-moto", "castable-moto-race", "deltalake"
SHAPED, SHAPED_RACE = "castable-shaped", "castable-shaped-race"
SYSTEMS = (LOCAL, MOTO, MOTO_RACE, SHAPED, SHAPED_RACE, DELTA)
FAIR = {MOTO_RACE: "false", SHAPED_RACE: "false"}
"""The ``commit.fair-turns`` property of each system that sets it: the *-race systems turn fair
turns off, so every commit is left to the race."""
ON_MOTO, BEHIND_PROXY = {MOTO, MOTO_RACE}, {SHAPED, SHAPED_RACE}
"""Systems on moto over HTTP, and on the same moto behind the shaping proxy (S3's latency)."""
LATENCY_S = 0.025
"""The shaping proxy's wait before each response, as bench/reads/shaped.py's."""
COLORS = {
    LOCAL: "#1b9e77",
    MOTO: "#7570b3",
    MOTO_RACE: "#e7298a",
    SHAPED: "#66a61e",
    SHAPED_RACE: "#e6ab02",
    DELTA: "#d95f02",
}
IDS_PER_WRITER = 1000
BUCKET = "bench"
STARTUP_TIMEOUT_S = 300.0
RESULT_TIMEOUT_S = 1800.0
STARTED = time.perf_counter()


def log(message: str) -> None:
    """Progress on stderr, with the elapsed time."""
    print(f"[{time.perf_counter() - STARTED:7.1f} s] {message}", file=sys.stderr, flush=True)


def one_row(row_id: int, writer: int) -> pa.Table:
    """A one-row batch."""
    return pa.table({"id": [row_id], "writer": [writer]}, schema=SCHEMA)


# ------------------------------------------------------------------------------------ writer processes


@dataclass(frozen=True)
class Commit:
    """One append call: the row id it carried, its latency and the exception class name if it failed."""

    row_id: int
    seconds: float
    failure: str | None


@dataclass
class WriterReport:
    """What a writer process sends back: its window on the system-wide monotonic clock and its commits."""

    writer: int
    start: float = 0.0
    end: float = 0.0
    commits: list[Commit] = field(default_factory=list)
    error: str | None = None


def appender(system: str, uri: str, options: dict[str, str] | None) -> Callable[[pa.Table], object]:
    """The append call of ``system``: a castable handle opened once, or deltalake's append by path."""
    if system == DELTA:
        return functools.partial(write_deltalake, uri, mode="append")
    return castable.open_table(uri, storage_options=options).append


def write_batches(
    system: str, uri: str, options: dict[str, str] | None, writer: int, commits: int, barrier: Any, results: Any
) -> None:
    """A writer process: open a handle, wait for the others, append ``commits`` one-row batches, report them."""
    report = WriterReport(writer)
    try:
        append = appender(system, uri, options)
        batches = [one_row(writer * IDS_PER_WRITER + i, writer) for i in range(commits)]
        barrier.wait(timeout=STARTUP_TIMEOUT_S)
    except Exception as exc:
        barrier.abort()
        report.error = f"{type(exc).__name__}: {exc}"
        results.put(report)
        return
    report.start = time.monotonic()
    for batch in batches:
        failure = None
        t0 = time.perf_counter()
        try:
            append(batch)
        except Exception as exc:
            failure = type(exc).__name__
        report.commits.append(Commit(batch["id"][0].as_py(), time.perf_counter() - t0, failure))
    report.end = time.monotonic()
    results.put(report)


# ------------------------------------------------------------------------------------ one run


@dataclass
class Run:
    """One timed window of W writers on one fresh table, and what verification found."""

    system: str
    writers: int
    commits: list[Commit]
    window_s: float
    rows_ok: bool
    versions_ok: bool
    problem: str | None

    @property
    def committed(self) -> int:
        return sum(c.failure is None for c in self.commits)

    @property
    def failures(self) -> Counter[str]:
        return Counter(c.failure for c in self.commits if c.failure is not None)

    @property
    def commits_per_s(self) -> float:
        return self.committed / self.window_s if self.window_s else math.nan

    def latency_ms(self, percentile: float) -> float:
        """A percentile of the successful commits' latency, in ms (NaN if none succeeded)."""
        ok = [c.seconds for c in self.commits if c.failure is None]
        return float(np.percentile(ok, percentile)) * 1000 if ok else math.nan


def create(system: str, name: str, work: Path, endpoints: dict[str, str]) -> tuple[str, dict[str, str] | None]:
    """A fresh empty table for one run; returns its URI and storage options."""
    if system == DELTA:
        uri = str(work / name)
        write_deltalake(uri, SCHEMA.empty_table())
        return uri, None
    if system in endpoints:
        uri, options = f"s3://{BUCKET}/{name}", {"endpoint_url": endpoints[system], "region": "us-east-1"}
    else:
        uri, options = str(work / name), None
    properties = {"commit.fair-turns": FAIR[system]} if system in FAIR else None
    castable.create_table(uri, SCHEMA, primary_key="id", properties=properties, storage_options=options)
    return uri, options


def verify(system: str, uri: str, options: dict[str, str] | None, expected: list[int]) -> tuple[bool, bool, str]:
    """Whether the table holds each expected id exactly once and its versions run densely 0..len(expected)."""
    try:
        if system == DELTA:
            dt = DeltaTable(uri)
            ids = dt.to_pyarrow_table(columns=["id"]).column("id").to_pylist()
            versions = list(range(dt.version() + 1))
        else:
            table = castable.open_table(uri, storage_options=options)
            ids = table.scan(["id"]).to_arrow().column("id").to_pylist()
            keys = (version_of_manifest_key(o.key) for o in table.store.list("manifest/"))
            versions = sorted(v for v in keys if v is not None)
    except Exception as exc:
        return False, False, f"verification raised {type(exc).__name__}: {exc}"
    rows_ok = Counter(ids) == Counter(expected)
    versions_ok = versions == list(range(len(expected) + 1))
    detail = (
        f"{len(ids)} rows ({len(set(ids))} distinct) for {len(expected)} successful commits; "
        f"{len(versions)} versions, {versions[0] if versions else '-'}..{versions[-1] if versions else '-'}"
    )
    return rows_ok, versions_ok, detail


def run_once(system: str, writers: int, commits: int, name: str, work: Path, endpoints: dict[str, str]) -> Run:
    """Start ``writers`` spawned processes on one fresh table, time their window and verify the table."""
    uri, options = create(system, name, work, endpoints)
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(writers), ctx.Queue()
    procs = [
        ctx.Process(target=write_batches, args=(system, uri, options, w, commits, barrier, results))
        for w in range(writers)
    ]
    try:
        for p in procs:
            p.start()
        reports: list[WriterReport] = [results.get(timeout=RESULT_TIMEOUT_S) for _ in procs]
        for p in procs:
            p.join()
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
    errors = sorted({r.error for r in reports if r.error})
    if errors:
        return Run(system, writers, [], 0.0, False, False, "writers did not start: " + "; ".join(errors))
    done = [c for r in reports for c in r.commits]
    window = max(r.end for r in reports) - min(r.start for r in reports)
    rows_ok, versions_ok, detail = verify(system, uri, options, [c.row_id for c in done if c.failure is None])
    run = Run(system, writers, done, window, rows_ok, versions_ok, None if rows_ok and versions_ok else detail)
    log(
        f"{system} W={writers}: {run.committed}/{len(done)} committed in {fmt_s(window)} "
        f"({run.commits_per_s:.1f}/s), failures {dict(run.failures) or 0}; {detail}"
    )
    return run


# ------------------------------------------------------------------------------------ stale handle


@dataclass(frozen=True)
class StaleRun:
    """One stale-handle setup: the late append's time and outcome, and the failures among the commits before it."""

    seconds: float
    failure: str | None
    earlier_failures: Counter[str]


def stale_handle(versions: int, setups: int, work: Path) -> list[StaleRun]:
    """Per fresh local table: open handle A, commit ``versions`` one-row appends with handle B, time A's append."""
    runs = []
    for s in range(setups):
        uri = str(work / f"stale-{s}")
        castable.create_table(uri, SCHEMA, primary_key="id")
        stale, fresh = castable.open_table(uri), castable.open_table(uri)
        earlier: Counter[str] = Counter()
        for i in range(versions):
            try:
                fresh.append(one_row(i, 0))
            except Exception as exc:
                earlier[type(exc).__name__] += 1
        failure = None
        t0 = time.perf_counter()
        try:
            stale.append(one_row(versions, 1))
        except Exception as exc:
            failure = type(exc).__name__
        runs.append(StaleRun(time.perf_counter() - t0, failure, earlier))
        log(f"stale handle {s + 1}/{setups}: {fmt_s(runs[-1].seconds)}, failure {failure}, earlier {dict(earlier)}")
    return runs


# ------------------------------------------------------------------------------------ report


@dataclass(frozen=True)
class Summary:
    """The repeats of one (system, W): medians of rates and percentiles, counts summed, checks all-of."""

    system: str
    writers: int
    attempted: int
    committed: int
    failures: Counter[str]
    rows_ok: bool
    versions_ok: bool
    commits_per_s: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    problems: list[str]

    @property
    def failed(self) -> int:
        return self.attempted - self.committed

    @property
    def clean(self) -> bool:
        return self.failed == 0 and self.rows_ok and self.versions_ok and not self.problems


def median(values: list[float]) -> float:
    """The median of the values that are not NaN (NaN if none are)."""
    kept = [v for v in values if not math.isnan(v)]
    return statistics.median(kept) if kept else math.nan


def summarize(runs: list[Run]) -> Summary:
    """Fold the repeats of one (system, W)."""
    return Summary(
        system=runs[0].system,
        writers=runs[0].writers,
        attempted=sum(len(r.commits) for r in runs),
        committed=sum(r.committed for r in runs),
        failures=sum((r.failures for r in runs), Counter()),
        rows_ok=all(r.rows_ok for r in runs),
        versions_ok=all(r.versions_ok for r in runs),
        commits_per_s=median([r.commits_per_s for r in runs]),
        p50_ms=median([r.latency_ms(50) for r in runs]),
        p99_ms=median([r.latency_ms(99) for r in runs]),
        max_ms=max((r.latency_ms(100) for r in runs), default=math.nan),
        problems=[r.problem for r in runs if r.problem],
    )


def num(value: float, digits: int = 1) -> str:
    return "-" if math.isnan(value) else f"{value:,.{digits}f}"


def ratio(summaries: dict[tuple[str, int], Summary], writers: int) -> float:
    """castable-local commits/s over deltalake's at ``writers`` (NaN if either was not measured)."""
    ours, theirs = summaries.get((LOCAL, writers)), summaries.get((DELTA, writers))
    if ours is None or theirs is None or not theirs.commits_per_s:
        return math.nan
    return ours.commits_per_s / theirs.commits_per_s


def results_table(summaries: dict[tuple[str, int], Summary]) -> list[str]:
    """One markdown row per (system, W), and the failures and verification problems under it."""
    lines = [
        "| system | writers | committed | failed | every row once | versions dense | commits/s | p50 (ms) "
        "| p99 (ms) | max (ms) | castable/deltalake |",
        "| --- | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    notes = []
    for (system, writers), s in summaries.items():
        vs = f"{num(ratio(summaries, writers), 2)}x" if system == LOCAL else ""
        lines.append(
            f"| {system} | {writers} | {s.committed} / {s.attempted} | {s.failed} | {'yes' if s.rows_ok else 'NO'} "
            f"| {'yes' if s.versions_ok else 'NO'} | {num(s.commits_per_s)} | {num(s.p50_ms)} | {num(s.p99_ms)} "
            f"| {num(s.max_ms)} | {vs} |"
        )
        if s.failures:
            classes = ", ".join(f"{name} x{n}" for name, n in s.failures.most_common())
            notes.append(f"- {system}, W={writers}: failed commits by exception class: {classes}")
        notes += [f"- {system}, W={writers}: {p}" for p in s.problems]
    return [*lines, *(["", *notes] if notes else [])]


def stale_lines(runs: list[StaleRun], versions: int) -> tuple[list[str], str]:
    """The stale-handle section and its target line."""
    seconds = statistics.median(r.seconds for r in runs)
    failed = [r.failure for r in runs if r.failure]
    earlier = sum((r.earlier_failures for r in runs), Counter())
    lines = [
        f"Handle A opened, then {versions:,} one-row commits through handle B on the local store, then one "
        f"append through A: median of {len(runs)} fresh setup(s) **{fmt_s(seconds)}** "
        f"(each: {', '.join(fmt_s(r.seconds) for r in runs)})."
    ]
    if failed:
        lines.append(f"A's append failed: {', '.join(failed)}.")
    if earlier:
        lines.append(f"B's commits failed: {', '.join(f'{k} x{n}' for k, n in earlier.most_common())}.")
    met = seconds < 1 and not failed and not earlier
    target = (
        f"- stale handle append after {versions:,} versions < 1 s: **{'met' if met else 'missed'}** ({fmt_s(seconds)})"
    )
    return lines, target


def target_lines(summaries: dict[tuple[str, int], Summary], writers: list[int]) -> list[str]:
    """Per target **met** or **missed**: clean commits per castable store and W, local commits/s against deltalake."""
    lines = []
    for (system, w), s in summaries.items():
        if system != DELTA:
            verdict = "met" if s.clean else "missed"
            lines.append(
                f"- zero failed commits and every row once, {system}, W={w}: **{verdict}** "
                f"({s.committed} committed, {s.failed} failed, rows {'ok' if s.rows_ok else 'WRONG'}, "
                f"versions {'dense' if s.versions_ok else 'NOT dense'})"
            )
    for system in (MOTO, MOTO_RACE, SHAPED, SHAPED_RACE):
        moto6 = summaries.get((system, 6))
        if moto6 is not None:
            fair = moto6.max_ms < 2000
            lines.append(
                f"- longest commit, {system}, W=6, under 2 s: **{'met' if fair else 'missed'}** "
                f"({num(moto6.max_ms)} ms; median {num(moto6.p50_ms)} ms, {num(moto6.commits_per_s)} commits/s)"
            )
    for w in writers:
        r = ratio(summaries, w)
        if not math.isnan(r):
            lines.append(
                f"- castable-local commits/s >= deltalake, W={w}: **{'met' if r >= 1 else 'missed'}** ({r:.2f}x)"
            )
    return lines


def plot(summaries: dict[tuple[str, int], Summary], path: Path) -> None:
    """Two panels against the number of writers: commits/s and p99 commit latency, one line per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (rate, p99) = plt.subplots(1, 2, figsize=(12, 5))
    for system in SYSTEMS:
        points = sorted((w, s) for (name, w), s in summaries.items() if name == system)
        if points:
            ws = [w for w, _ in points]
            rate.plot(ws, [s.commits_per_s for _, s in points], marker="o", label=system, color=COLORS[system])
            p99.plot(ws, [s.p99_ms for _, s in points], marker="o", label=system, color=COLORS[system])
    writers = sorted({w for _, w in summaries})
    for ax, ylabel in ((rate, "successful commits per second (median)"), (p99, "p99 commit latency, ms (median)")):
        ax.set_xlabel("writer processes")
        ax.set_xticks(writers)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend()
    p99.set_yscale("log")
    fig.suptitle("Concurrent one-row appends to one table, default settings")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", type=int, nargs="+", help="writer processes per run (default 4 6 8 16)")
    parser.add_argument("--commits", type=int, help="one-row appends per writer (default 25)")
    parser.add_argument("--repeats", type=int, help="runs per (system, writers) (default 3)")
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument("--quick", action="store_true", help="smoke run: writers 2, 5 commits, 1 repeat")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where contention.md and contention.png go")
    args = parser.parse_args()
    writers = args.writers or ([2] if args.quick else [4, 6, 8, 16])
    commits = args.commits or (5 if args.quick else 25)
    repeats = args.repeats or (1 if args.quick else 3)
    stale_versions, stale_setups = (50, 1) if args.quick else (1000, 3)
    if not 0 < commits <= IDS_PER_WRITER:
        parser.error(f"--commits must be between 1 and {IDS_PER_WRITER}")

    work = Path(tempfile.mkdtemp(prefix="castable-contention-"))
    with ExitStack() as servers:
        endpoints: dict[str, str] = {}
        if (ON_MOTO | BEHIND_PROXY) & set(args.systems):
            import boto3

            server, endpoint = moto_server()
            servers.callback(server.close)
            boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=BUCKET)
            endpoints = dict.fromkeys(ON_MOTO, endpoint)
            if BEHIND_PROXY & set(args.systems):
                endpoints |= dict.fromkeys(BEHIND_PROXY, servers.enter_context(shaping_proxy(endpoint, LATENCY_S)))
        servers.callback(shutil.rmtree, work, ignore_errors=True)
        summaries: dict[tuple[str, int], Summary] = {}
        for w in writers:
            for system in args.systems:
                runs = [run_once(system, w, commits, f"{system}-{w}-{r}", work, endpoints) for r in range(repeats)]
                summaries[system, w] = summarize(runs)
        stale = stale_handle(stale_versions, stale_setups, work)
    elapsed = time.perf_counter() - STARTED

    args.out.mkdir(parents=True, exist_ok=True)
    plot(summaries, args.out / "contention.png")
    stale_section, stale_target = stale_lines(stale, stale_versions)
    command = " ".join(["python -m bench contention", *sys.argv[1:]])
    lines = [
        *report_header(
            "contention benchmark",
            f"deltalake {deltalake_version}. `{command}` took {elapsed / 60:.1f} min.",
        ),
        f"W writer processes (spawn; each opens its own handle once, then all start at a barrier) each append "
        f"{commits} one-row batches to one table with default settings (deltalake: `write_deltalake(path, batch, "
        f'mode="append")`). Medians of {repeats} run(s) for commits/s (successful commits over the window from '
        "the first writer's start to the last writer's end) and for p50/p99 latency of successful commits; "
        "commit counts are summed. castable-moto runs against a moto server over HTTP whose object PUT, POST "
        "and DELETE are serialized, as S3 applies conditional writes atomically; castable-shaped is the same moto "
        f"behind a proxy that answers each request {LATENCY_S * 1000:.0f} ms late (S3's time to first byte); the "
        "*-race systems set `commit.fair-turns = false`, leaving every commit to the race instead of the default "
        "fair turns (writers that keep losing take turns). "
        "*castable/deltalake* is the commits/s ratio on the local store.",
        "",
        "## Concurrent writers",
        "",
        *results_table(summaries),
        "",
        "## Stale handle",
        "",
        *stale_section,
        "",
        "## Targets",
        "",
        *target_lines(summaries, writers),
        stale_target,
        "",
        "![commits/s and p99 latency against writers](contention.png)",
    ]
    publish("contention", lines, args.out)


if __name__ == "__main__":
    main()
