"""A fixed-size deployment (tables as data) against the per-table one, side by side.

1. Template size and resource count against the number of tables: the per-table stack of revision
   66afb07 (a landing queue, dead letters, ingest function and maintenance schedule per table, in
   nested stacks of 30; rows from deployment_templates.py, each count synthesised in a
   worktree of that revision) beside the working tree's fixed-size stack, synthesised once,
   offline, as tests/helpers/cdk.py's ``synth(outdir, config="")`` does (no bundling), in a process
   of its own. The fixed-size stack takes no table list (tables are data in the bucket), so its one
   synth is its row for every count.
2. Ingest latency, from a landing object's PUT (its return) to the return of the invocation that
   appended it, with 1 busy table and with many: the per-table functions of 66afb07 (one function
   per table, ``CASTABLE_TABLE``/``CASTABLE_LANDING``, S3 notification records in SQS messages)
   against the shared function of the working tree (``CASTABLE_BUCKET``, EventBridge "Object
   Created" events in SQS messages, one commit per table a batch). Both run the real handler in
   one process per architecture (a child process: 66afb07's from a worktree of it, with that
   revision's ``castable``; the working tree's from it), against one moto S3 server in this
   process, so the handlers do not share its GIL. The SQS -> Lambda event source mapping is
   modelled alike for both: a poller per function takes the first message, then up to 50 or what
   arrives within the batching window W, and invokes the handler in a thread once one of the
   function's C concurrent invocations is free (66afb07: C=2 for each table's function and queue;
   the working tree: one queue, C=20, the stack's default ``ingest_concurrency``). The shared
   queue is plain FIFO (no fair-queue modelling); the route function's hop in front of it is
   modelled as a poller with no batching window running the route's grouping (its SQS and Lambda
   round trips, tens of milliseconds on AWS, are not). A message whose file
   the invocation reported failed (``batchItemFailures``) goes back into its queue at once.
   Producers PUT 100-row Parquet files (id int64 not null, category string, value float64) at a
   steady rate per busy table, spread evenly, for ``--seconds``; the run then drains. 66afb07's
   handler reads ``os.environ`` per invocation, so in one process each of its functions sees its
   own ``CASTABLE_TABLE``/``CASTABLE_LANDING`` through a per-thread overlay of the module's
   ``os.environ`` (its code is unchanged).

Usage: python -m bench deployment [--counts 0 100 250] [--seconds 25]
       [--window 1] [--rate-one 2] [--busy 100] [--rate-many 0.05] [--out DIR] [--quick]
Writes DIR/deployment.md (DIR defaults to bench/results/). ``--quick``: no synth, 3 busy tables,
a few seconds of load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench.common.benchlib import RESULTS, ROOT, fmt_s, log, publish, report_header
from bench.deployment.deployment_ingest import BATCH, DRAIN_TIMEOUT, ROWS

PYTHON = ROOT / ".venv" / "bin" / "python"
COUNTS = (0, 100, 250)
WINDOW = 1.0
"""The batching window of the bench (both stacks deploy 30 s, which adds the same to both)."""
OLD_CONCURRENCY = 2
"""66afb07's ``maximumConcurrency`` for each table's function (its default)."""
NEW_CONCURRENCY = 20
"""The working tree's ``ingest_concurrency`` default: the shared function's ``maximumConcurrency``."""
SECONDS = 25.0
RATE_ONE = 2.0
"""Files a second into the one busy table."""
BUSY = 100
RATE_MANY = 0.05
"""Files a second into each of the many busy tables (5 a second in all at 100 tables)."""
ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_DISABLED": "true",
    "POWERTOOLS_LOG_LEVEL": "ERROR",
    "POWERTOOLS_SERVICE_NAME": "castable-ingest",
    "POWERTOOLS_METRICS_NAMESPACE": "castable",
    "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    "PYTHONDONTWRITEBYTECODE": "1",
}
OLD, NEW = "per-table functions (66afb07)", "shared function (working tree)"

NEW_SYNTH = """\
import json, os, sys, time
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
import aws_cdk as cdk
import app, infra
outdir, result = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
cdk_app = cdk.App(context={"aws:cdk:bundling-stacks": [], "config": ""}, outdir=outdir)
app.build(cdk_app)
cdk_app.synth()
seconds = time.perf_counter() - t0
with open(result, "w") as f:
    json.dump({"seconds": seconds, "infra": infra.__file__, "app": app.__file__}, f)
"""
"""What the fixed-size stack's synth process runs (the working tree's ``app``), as tests/helpers/cdk.py."""


# ------------------------------------------------------------------ part 1: templates


def fixed_size_stack() -> dict[str, Any]:
    """The working tree's stack, synthesised once offline in a process of its own, measured as
    deployment_templates.py measures the per-table stack (``tables`` is filled in per row)."""
    from bench.deployment.deployment_templates import measure

    with tempfile.TemporaryDirectory(prefix="castable-cdk-out-") as out:
        outdir, result = Path(out) / "fixed", Path(out) / "fixed.json"
        env = {**os.environ, **ENV, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'src'}"}
        log("working tree: synthesising the fixed-size stack")
        t0 = time.perf_counter()
        done = subprocess.run(
            [str(PYTHON), "-c", NEW_SYNTH, str(outdir), str(result)], cwd=ROOT, env=env, capture_output=True, text=True
        )
        process_s = time.perf_counter() - t0
        if done.returncode != 0:
            raise RuntimeError(f"synth of the fixed-size stack failed ({done.returncode}):\n{done.stderr[-4000:]}")
        child = json.loads(result.read_text())
        for module in ("infra", "app"):
            if not Path(child[module]).resolve().is_relative_to(ROOT) or ".git" in child[module]:
                raise RuntimeError(f"{module} was imported from {child[module]}, not {ROOT}")
        row = {"stack": "fixed size", "revision": "working tree", **measure(outdir)}
    row |= {"synth_s": child["seconds"], "process_s": process_s}
    log(f"fixed size: main {row['main_bytes']:,} B, {row['resources']} resources, synth {fmt_s(row['synth_s'])}")
    return row


def templates(counts: list[int]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The per-table stack's rows for ``counts`` and the fixed-size stack's one row, interleaved
    by count (the fixed-size row repeated for each)."""
    from bench.deployment.deployment_templates import per_table_stack

    old = per_table_stack(counts)
    new = fixed_size_stack()
    rows = []
    for r in old:
        rows += [r, {**new, "tables": r["tables"]}]
    return rows, new


# ------------------------------------------------------------------ part 2: ingest latency (parent side)


def ingest_run(
    arch: str, tree: Path, endpoint: str, busy: int, rate: float, seconds: float, window: float, work: Path
) -> dict[str, Any]:
    """One architecture's run under one load in a child process (``tree``'s handler and castable)."""
    from helpers.s3servers import new_bucket

    bucket = new_bucket(endpoint, aws_access_key_id="testing", aws_secret_access_key="testing")
    spec = {
        "arch": arch,
        "endpoint": endpoint,
        "bucket": bucket,
        "tables": [f"t{i:04d}" for i in range(1, busy + 1)],
        "concurrency": OLD_CONCURRENCY if arch == "old" else NEW_CONCURRENCY,
        "rate": rate,
        "seconds": seconds,
        "window": window,
    }
    path = work / f"{arch}-{busy}.json"
    path.write_text(json.dumps(spec))
    # ``tree``'s lambdas and castable come first; this tree's bench package after them (the
    # revisions measured have no bench/__init__.py, so this one's is the package imported).
    env = {
        **os.environ,
        **ENV,
        "AWS_ENDPOINT_URL": endpoint,
        "PYTHONPATH": os.pathsep.join(map(str, (tree, tree / "src", ROOT))),
    }
    t0 = time.perf_counter()
    done = subprocess.run(
        [str(PYTHON), "-m", "bench.deployment.deployment_ingest", str(path)],
        cwd=tree,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        timeout=seconds + DRAIN_TIMEOUT + 300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{arch} with {busy} busy tables failed ({done.returncode})")
    result = json.loads(path.with_suffix(".result.json").read_text())
    result["process_s"] = time.perf_counter() - t0
    for module in ("handler", "castable"):
        if not Path(result[module]).resolve().is_relative_to(tree.resolve()):
            raise RuntimeError(f"{arch}: {module} was imported from {result[module]}, not {tree}")
    lat = sorted(result["latencies"])
    result["median"] = statistics.median(lat) if lat else float("nan")
    result["p90"] = lat[min(len(lat) - 1, int(0.9 * len(lat)))] if lat else float("nan")
    inv = result["invocations"]
    result["n_invocations"] = len(inv)
    result["messages_per_invocation"] = statistics.mean(m for m, _, _ in inv) if inv else 0.0
    result["tables_per_invocation"] = statistics.mean(t for _, _, t in inv) if inv else 0.0
    result["invocation_median"] = statistics.median(s for _, s, _ in inv) if inv else 0.0
    log(
        f"{arch}, {busy} busy: {len(lat)}/{result['files']} files, median {fmt_s(result['median'])}, "
        f"p90 {fmt_s(result['p90'])}, {len(inv)} invocations, retried {result['retried']}, "
        f"rows {result['rows']}/{result['rows_expected']}, landing left {result['landing_left']}"
    )
    return result


def latency_rows(
    busy: int, rate_one: float, rate_many: float, seconds: float, window: float
) -> list[tuple[str, int, float, dict[str, Any]]]:
    """Both architectures under both loads: (architecture, busy tables, rate a table, result)."""
    from bench.common.benchlib import moto_server
    from bench.deployment.deployment_templates import REVISION, worktree

    os.environ.update({k: v for k, v in ENV.items() if k.startswith("AWS_")})
    stop, endpoint = moto_server()
    rows = []
    try:
        with worktree(REVISION) as old_tree, tempfile.TemporaryDirectory(prefix="castable-deployment-") as work:
            for tables, rate in ((1, rate_one), (busy, rate_many)):
                for arch, tree in (("old", old_tree), ("new", ROOT)):
                    result = ingest_run(arch, tree, endpoint, tables, rate, seconds, window, Path(work))
                    rows.append((OLD if arch == "old" else NEW, tables, rate, result))
    finally:
        stop.close()
    return rows


def render_latency(rows: list[tuple[str, int, float, dict[str, Any]]]) -> str:
    lines = [
        "| functions | busy tables | files/s a table (in all) | files ingested | median | p90 | max "
        "| invocations | files an invocation | tables an invocation | invocation (median) | retried "
        "| NEW/OLD median |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    old_median = {tables: r["median"] for arch, tables, _, r in rows if arch == OLD}
    for arch, tables, rate, r in rows:
        ratio = f"**{r['median'] / old_median[tables]:.2f}**" if arch == NEW and tables in old_median else ""
        lat = r["latencies"]
        lines.append(
            f"| {arch} | {tables} | {rate:g} ({rate * tables:g}) | {len(lat)} of {r['files']} "
            f"| {fmt_s(r['median'])} | {fmt_s(r['p90'])} | {fmt_s(max(lat, default=0.0))} | {r['n_invocations']} "
            f"| {r['messages_per_invocation']:.1f} | {r['tables_per_invocation']:.1f} "
            f"| {fmt_s(r['invocation_median'])} | {r['retried']} | {ratio} |"
        )
    return "\n".join(lines)


def checks(rows: list[tuple[str, int, float, dict[str, Any]]]) -> list[str]:
    """What each run left: rows in the tables against files put, landing objects left, drain."""
    out = []
    for arch, tables, _, r in rows:
        ok = r["rows"] == r["rows_expected"] and r["landing_left"] == 0 and r["drained"] and not r["lost"]
        out.append(
            f"- {arch}, {tables} busy: {r['rows']:,} rows in the tables of {r['rows_expected']:,} put (warm-up file "
            f"included), {r['landing_left']} landing objects left, {r['lost']} files given up on, "
            f"{'drained' if r['drained'] else 'NOT drained'} "
            f"{fmt_s(r['total_s'] - r['produced_s'])} after the last PUT, producers at most "
            f"{fmt_s(r['late_max_s'])} behind schedule, tables created in {fmt_s(r['created_s'])}"
            f"{'' if ok else ' — **incomplete**'}."
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=list(COUNTS))
    parser.add_argument("--seconds", type=float, default=SECONDS)
    parser.add_argument("--window", type=float, default=WINDOW)
    parser.add_argument("--rate-one", type=float, default=RATE_ONE)
    parser.add_argument("--busy", type=int, default=BUSY)
    parser.add_argument("--rate-many", type=float, default=RATE_MANY)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--quick", action="store_true", help="no synth; 3 busy tables; 3 s of load")
    args = parser.parse_args()
    if args.quick:
        args.counts, args.seconds, args.busy, args.rate_many = [], 3.0, 3, 1.0
    t0 = time.perf_counter()
    sizes, new = templates(args.counts) if args.counts else ([], None)
    latency = latency_rows(args.busy, args.rate_one, args.rate_many, args.seconds, args.window)
    total_s = time.perf_counter() - t0
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False).stdout.strip()
    lines = report_header(
        "deployment (a fixed-size deployment, tables as data)",
        f"aws-cdk-lib {version('aws-cdk-lib')}, node {node}, moto {version('moto')}. Whole run {fmt_s(total_s)}"
        f"{' (--quick)' if args.quick else ''}.",
    )
    lines += ["## Template size and resources against the number of tables", ""]
    if sizes and new is not None:
        from bench.deployment.deployment_templates import render

        lines += [
            "The per-table stack of revision 66afb07 (a landing queue, dead letters, ingest function and "
            "maintenance schedule per table, in nested stacks of 30; `-c tables=[...]`, default settings) beside "
            "the working tree's fixed-size stack (`-c config=`), both synthesised offline without bundling, one "
            "synth at a time in its own process, as bench/deployment/deployment_templates.py measures them. The "
            "fixed-size stack takes no table list (a table is data in the bucket: `tables/<name>`, ingested as its "
            f"properties say), so it was synthesised once and its row is the same for every count ({new['resources']} "
            f"resources, {new['main_bytes']:,} B); its synth time is of that one synth.",
            "",
            render(sizes),
        ]
    else:
        lines += ["Not run (`--quick`)."]
    lines += [
        "",
        "## Ingest latency: a landing object to a committed version",
        "",
        "Time from a landing object's PUT (its return) to the return of the invocation that appended it. "
        "The real handlers, each architecture in one process of its own (66afb07's handler and `castable` from a "
        "worktree of that revision; the working tree's from it), against one moto S3 server in the parent "
        "process. The SQS -> Lambda event source mapping is modelled the same for both: per function a poller "
        f"takes the first message, then up to {BATCH} or what arrives within the batching window "
        f"W = {args.window:g} s (both stacks deploy 30 s, which adds about the same to both), and invokes the "
        "handler in a thread once one of the function's C concurrent invocations is free. Per-table functions: "
        f"a queue and function per table, C = {OLD_CONCURRENCY} each (S3 notification records). Shared function: "
        f"one queue for every table, C = {NEW_CONCURRENCY} (the stack's default `ingest_concurrency`), EventBridge "
        "events, one commit per table in a batch that mixes tables. The shared queue is plain FIFO: the fair "
        "queue's sharing among tables is not modelled. The route function's hop in front of it (EventBridge "
        "rule -> queue -> route function -> fair queue) is modelled as a poller with no batching window (as "
        "deployed) that runs the route's own grouping on each event; its SQS and Lambda round trips (tens of "
        "milliseconds on AWS, beside a 30 s batching window) are not. Invocations are threads of one process "
        f"(one GIL) where Lambda gives each its own sandbox. Producers PUT {ROWS}-row Parquet files (id int64 "
        "not null, category string, "
        f"value float64) at a steady rate per busy table, the tables' files spread evenly, for {args.seconds:g} s; "
        "then the run drains. A warm-up file (not counted) goes through first.",
        "",
        render_latency(latency),
        "",
        *checks(latency),
    ]
    publish("deployment", lines, args.out)


if __name__ == "__main__":
    main()
