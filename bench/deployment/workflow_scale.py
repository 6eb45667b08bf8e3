"""Both workflows at the scale Step Functions' limits would break them, in moto's interpreter.

An erasure on a table not sorted by its key (every file's id range spans the erased id, so the
plan names every file: the per-user erase of a log table) over ``--erase-files`` two-row files,
and a maintenance run over ``--maintain-files`` small files. Each execution is read back from
the history moto records and checked against what AWS enforces and moto does not: 256 KiB per
state input or output, 25,000 events per execution. The maintain-due schedule runs over
``--schedule-tables`` due tables (copies of one), its children a stand-in for the maintenance
workflow; its discovery is one Lambda invocation, held to Lambda's 15 minutes. The Lambda tasks run the real handlers
in-process against moto's S3 in the same process (tests/helpers/workflows.py, as the tests run).

Usage: python -m bench workflow-scale [--erase-files 5000]
       [--maintain-files 10000] [--schedule-tables 2000] [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path
from typing import Any

import boto3
from helpers.workflows import (
    HISTORY_LIMIT,
    STATE_PAYLOAD_LIMIT,
    due_tables,
    failures,
    history,
    largest_payload,
    run,
    schedule_run,
    wide_table,
    workflows,
)

import castable
from bench.common.benchlib import RESULTS, log, moto_server, publish, report_header

LAMBDA_TIMEOUT = 900
"""Lambda's limit on one invocation, in seconds (15 minutes)."""


def one(machine: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Run an execution; its status, time, history length and largest payload."""
    started = time.perf_counter()
    try:
        d = run(machine, payload, seconds=3600)
    except AssertionError as e:  # a limit run() checks was passed
        return {"status": f"over a limit: {e}", "seconds": time.perf_counter() - started, "events": 0, "largest": 0}
    seconds = time.perf_counter() - started
    if d["status"] != "SUCCEEDED":
        log(f"{d['status']}: {failures(d)}")
    return {
        "status": d["status"],
        "seconds": seconds,
        "events": len(history(d)),
        "largest": largest_payload(d),
        "output": json.loads(d.get("output") or "{}"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--erase-files", type=int, default=5000)
    parser.add_argument("--maintain-files", type=int, default=10000)
    parser.add_argument("--schedule-tables", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="20 and 40 files, 20 tables: a smoke run")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    erase_files, maintain_files, schedule_tables = (
        (20, 40, 20) if args.quick else (args.erase_files, args.maintain_files, args.schedule_tables)
    )
    # moto keeps every child execution's objects alive; with Python's default collector
    # thresholds each full collection scans them all, and past ~2,000 child executions a splice
    # took ~1 s instead of ~50 ms. Collecting less often keeps the stand-in's cost linear.
    gc.set_threshold(200_000, 100, 1000)
    server, endpoint = moto_server()
    rows = []
    try:
        with workflows(endpoint) as machines:
            boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="scale")
            log(f"maintenance over {maintain_files:,} files")
            t = wide_table("scale", endpoint, "maintain", maintain_files)
            maintain: dict[str, Any] = {"table": t.uri, "retain_versions": 1, "retain_hours": None, "grace_hours": 0}
            result = one(machines["maintenance"], maintain)
            options = {"endpoint_url": endpoint, "region": "us-east-1"}
            after = castable.open_table(t.uri, storage_options=options)
            result["check"] = after.count() == 2 * maintain_files and len(after.manifest.data_files) < maintain_files
            result["files_after"] = len(after.manifest.data_files)
            result["what"] = f"{maintain_files:,} files compacted to {result['files_after']:,}"
            rows.append(("maintenance", f"{maintain_files:,} files", result))
            log(f"erasure over {erase_files:,} files")
            t = wide_table("scale", endpoint, "erase", erase_files)
            result = one(machines["erasure"], {"table": t.uri, "predicate": "id = 500000", "commit_id": "user-500000"})
            result["check"] = result.get("output", {}).get("files_spliced") == 1 and result["output"].get("verified")
            output = result.get("output", {})
            result["what"] = f"{output.get('rows_erased')} row erased, verified {output.get('verified')}"
            rows.append(("erasure", f"{erase_files:,} files", result))
            log(f"maintain-due over {schedule_tables:,} tables")
            started = time.perf_counter()
            due_tables(machines["bucket"], endpoint, schedule_tables)
            began = time.perf_counter()
            scheduled = schedule_run(machines["bucket"], machines["maintenance-function"])
            schedule = {
                "status": scheduled.execution["status"],
                "seconds": time.perf_counter() - began,
                "events": scheduled.events,
                "largest": scheduled.largest,
                "discovery": scheduled.discovery_seconds,
                "check": scheduled.served == scheduled.due == scheduled.children == schedule_tables
                and scheduled.discovery_seconds < LAMBDA_TIMEOUT,
                "what": f"{scheduled.children:,} children, discovery {scheduled.discovery_seconds:.0f} s",
            }
            log(f"{schedule_tables:,} tables made in {began - started:.0f} s")
            rows.append(("maintain-due", f"{schedule_tables:,} tables", schedule))
    finally:
        server.close()
    lines = [
        *report_header(
            "Workflows at scale, against Step Functions' limits",
            f"python -m bench workflow-scale --erase-files {erase_files} --maintain-files {maintain_files} "
            f"--schedule-tables {schedule_tables}",
        ),
        "",
        "| workflow | size | status | time | history events (limit 25,000) | largest state payload (limit 256 KiB) "
        "| result |",
        "| --- | ---: | --- | ---: | ---: | ---: | --- |",
    ]
    met = True
    for name, size, r in rows:
        within = r["status"] == "SUCCEEDED" and r["events"] <= HISTORY_LIMIT and r["largest"] <= STATE_PAYLOAD_LIMIT
        met = met and within and bool(r["check"])
        lines.append(
            f"| {name} | {size} | {r['status']} | {r['seconds']:.0f} s | {r['events']:,} | "
            f"{r['largest'] / 1024:.1f} KiB | {r['what'] if r['status'] == 'SUCCEEDED' else r['status']} |"
        )
    lines += [
        "",
        "## Targets",
        "",
        f"- {erase_files:,}-file erasure, {maintain_files:,}-file maintenance and the schedule over "
        f"{schedule_tables:,} tables (its discovery within Lambda's 15 minutes) complete within every limit: "
        f"**{'met' if met else 'missed'}**",
    ]
    publish("workflow_scale", lines, args.out)


if __name__ == "__main__":
    main()
