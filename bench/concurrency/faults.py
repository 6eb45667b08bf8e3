"""Commits over a lossy network: throughput and success rate of 4 processes appending with commit
ids to one table on a local moto server, while S3's answers are lost after it applied a write
(botocore sends it again), requests are answered 503 SlowDown, or GETs break mid-body; the
faults are injected in each process's SDK send (tests/helpers/lossy.py), as in production.

Each scenario runs on a fresh table, scenarios interleaved round by round (the machine's noise
falls on all of them alike); medians over the rounds. A commit succeeds when its one call
returns (no caller retry); afterwards every acknowledged commit must be in the table exactly once
and no unacknowledged one more than once.

    python -m bench faults [--quick] [--rounds N] [--commits N] [--out DIR]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from helpers.lossy import Faults, injected, install  # tests/helpers, on sys.path by bench/__init__.py
from helpers.s3servers import new_bucket

import castable
from bench.common.benchlib import RESULTS, moto_server, publish, report_header

WRITERS = 4
SCENARIOS = {
    "no faults": Faults(),
    "1% of write answers lost": Faults(lose=0.01),
    "15% of write answers lost": Faults(lose=0.15),
    "5% of requests answered 503": Faults(slow_down=0.05),
    "15% lost + 5% 503 + 5% GETs reset": Faults(lose=0.15, slow_down=0.05, reset_body=0.05),
}
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("writer", pa.int32())])


def append_commits(uri: str, options: dict[str, str], faults: Faults, writer: int, commits: int) -> dict[str, Any]:
    """In a worker process: append ``commits`` blocks of 10 rows, each once with its own commit
    id; return what was acknowledged, the errors, the wall time and the faults injected."""
    table = castable.open_table(uri, storage_options=options)
    table.store.check_conditional_writes()  # the probe and the client, before the clock starts
    install(faults)
    before = Counter(injected)
    done: dict[str, Any] = {"acknowledged": [], "errors": Counter(), "seconds": 0.0}
    began = time.perf_counter()
    for n in range(commits):
        start = writer * 1_000_000 + n * 10
        rows = pa.table({"id": range(start, start + 10), "writer": [writer] * 10}, schema=SCHEMA)
        try:
            table.append(rows, commit_id=f"w{writer}-{n}")
            done["acknowledged"].append(start)
        except castable.CastableError as e:
            done["errors"][type(e).__name__] += 1
    done["seconds"] = time.perf_counter() - began
    done["injected"] = dict(Counter(injected) - before)
    install(Faults())
    return done


@dataclass
class Run:
    commits: int
    succeeded: int
    seconds: float
    errors: Counter[str]
    injected: Counter[str]
    exact: bool
    """Every acknowledged commit in the table once, no other more than once, one version each."""

    @property
    def per_second(self) -> float:
        return self.succeeded / self.seconds

    @property
    def success(self) -> float:
        return self.succeeded / self.commits


def run_once(endpoint: str, faults: Faults, commits: int, pool: Any) -> Run:
    options = {"endpoint_url": endpoint, "region": "us-east-1"}
    uri = f"s3://{new_bucket(endpoint)}/t"
    table = castable.create_table(uri, SCHEMA, primary_key="id", storage_options=options)
    start = table.version
    results = pool.starmap(append_commits, [(uri, options, faults, w, commits) for w in range(WRITERS)])
    table.refresh()
    acknowledged = {s for r in results for s in r["acknowledged"]}
    ids = table.scan(["id"]).to_arrow()["id"].to_pylist()
    blocks = Counter(i - i % 10 for i in ids)
    exact = (
        len(ids) == len(set(ids))
        and acknowledged <= set(blocks)
        and all(n == 10 for n in blocks.values())
        and table.version - start == len(blocks)
    )
    errors: Counter[str] = Counter()
    faults_seen: Counter[str] = Counter()
    for r in results:
        errors.update(r["errors"])
        faults_seen.update(r["injected"])
    return Run(
        WRITERS * commits,
        len(acknowledged),
        max(r["seconds"] for r in results),
        errors,
        faults_seen,
        exact,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a tiny run, for the smoke tests")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--commits", type=int, default=25, help="per writer process")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    rounds, commits = (1, 4) if args.quick else (args.rounds, args.commits)
    stack, endpoint = moto_server()
    runs: dict[str, list[Run]] = {name: [] for name in SCENARIOS}
    with stack, mp.get_context("spawn").Pool(WRITERS) as pool:
        for r in range(rounds):
            for name, faults in SCENARIOS.items():
                faults = Faults(**{**faults.__dict__, "seed": r})
                runs[name].append(run_once(endpoint, faults, commits, pool))
                last = runs[name][-1]
                print(f"round {r + 1}/{rounds} {name}: {last.per_second:.1f} commits/s, {last.success:.1%}", flush=True)

    clean = statistics.median(run.per_second for run in runs["no faults"])
    lines = report_header(
        "commits over a lossy network",
        f"{WRITERS} processes x {commits} appends (10 rows, each with a commit id, no caller retry) on one "
        f"table, moto S3 on 127.0.0.1, castable's default settings; {rounds} rounds, scenarios interleaved, "
        "medians. Faults injected in each process's SDK send (tests/helpers/lossy.py).",
    )
    lines += [
        "| scenario | commits/s | vs no faults | succeeded | exactly once | faults injected | errors |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, done in runs.items():
        rate = statistics.median(run.per_second for run in done)
        succeeded = sum(run.succeeded for run in done) / sum(run.commits for run in done)
        injected_total: Counter[str] = sum((run.injected for run in done), Counter())
        errors: Counter[str] = sum((run.errors for run in done), Counter())
        lines.append(
            f"| {name} | {rate:.1f} | {rate / clean:.2f}x | {succeeded:.1%} | "
            f"{'yes' if all(run.exact for run in done) else '**no**'} | "
            f"{', '.join(f'{k} {v}' for k, v in sorted(injected_total.items())) or '-'} | "
            f"{', '.join(f'{k} {v}' for k, v in sorted(errors.items())) or '-'} |"
        )
    lossy = runs["15% of write answers lost"] + runs["15% lost + 5% 503 + 5% GETs reset"]
    success = sum(run.succeeded for run in lossy) / sum(run.commits for run in lossy)
    one = statistics.median(run.per_second for run in runs["1% of write answers lost"]) / clean
    exact = all(run.exact for done in runs.values() for run in done)

    def verdict(met: bool) -> str:
        return "**met**" if met else "**missed**"

    lines += [
        "",
        "## Targets",
        "",
        f"- At least 99% of commits succeed with 15% of write answers lost: {success:.1%}, {verdict(success >= 0.99)}.",
        f"- Throughput with 1% lost within 10% of no faults: {one:.2f}x, {verdict(one >= 0.9)}.",
        f"- Every acknowledged commit exactly once, none twice: {verdict(exact)}.",
    ]
    publish("faults", lines, args.out)


if __name__ == "__main__":
    main()
