"""What checking every file of a file list against its footer costs the commit function.

A Spark job's executors describe the files they wrote (rows, row groups, statistics) in a file
list; the commit function reads each file's footer (a range GET each, 64 at once) and refuses
the commit if any description disagrees. This runs the deployed function's handler on one list
of ``--files`` (200,000) files in one directory, against S3 being a moto server behind the
shaping proxy of bench/common/shaped_s3.py (25 ms before each response), two ways side by side:

- **with the check** (castable now);
- **without it**: the path before the check, objects shown to exist with the described size
  and ETag by listing their directory, no footer read (the check switched off in this process).

and the split the deployed function makes of a list longer than one slice (20,000 entries):
**one slice's check** (an invocation with ``"check": [0, 20000]``, as each of the function's
invocations of itself runs) and **the commit after its slices** (the invoked function's own part:
the list read, then ``add_files`` taking the checked entries without reading the files again; here
the slices' invocations are answered at once, as they were timed on their own). On Lambda the
slices run in parallel, so a list of 200,000 takes about one slice plus that commit.

Each run commits the whole list into a table restored to its empty first version, so both
register the same objects; the runs alternate, ``--repeats`` of each, and the report gives
medians. The objects are tiny Parquet files (100 rows, ~1.5 KB) put straight into moto first:
the time that takes is reported too. The store's one-time probe of conditional writes is paid
by a warm-up commit before the clock starts.

Usage: python -m bench filelist-check [--files 200000] [--repeats 1]
Writes bench/results/filelist_check.md as well as printing it. A run of fewer files also projects
its times linearly to 200,000 (the Makefile runs 20,000, about 7 minutes): on a 2-core machine
moto takes 200,000 puts in about 27 minutes and then answers about 100 footer GETs a second, so
the full run takes over an hour.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import boto3
from botocore.config import Config

import castable
from bench.common.benchlib import (
    SCHEMA,
    commit_function_environment,
    fmt_s,
    log,
    publish,
    report_header,
    small_parquet_file,
)
from bench.common.shaped_s3 import ShapedS3, shaped_s3
from bench.deployment.commit_scale import Context
from castable.ops import register
from castable.ops.register import describe_data_file, write_file_list

BUCKET = "bench-filelist"
TIMEOUT = 900
"""The commit function's timeout in seconds (infra/stack.py)."""
TARGET_FILES = 200_000
"""The list the target names: a large Spark job's files."""
MEMORY_MB = 1024
"""The commit function's memory (infra/stack.py): Lambda gives a full vCPU at 1,769 MB."""


@contextmanager
def footers_unchecked() -> Iterator[None]:
    """The commit as it was before footers were checked: no footer is read or compared."""
    with (
        mock.patch.object(register, "footer_entry", lambda store, info, schema: None),
        mock.patch.object(register, "check_described", lambda entry, found, schema: None),
    ):
        yield


def put_all(s3: ShapedS3, prefix: str, keys: list[str], body: bytes) -> float:
    """Put ``body`` at every key straight into moto (no proxy); seconds taken."""
    client = boto3.client("s3", endpoint_url=s3.direct, region_name="us-east-1", config=Config(max_pool_connections=32))
    started = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: client.put_object(Bucket=BUCKET, Key=f"{prefix}/{k}", Body=body), keys))
    return time.perf_counter() - started


def run(s3: ShapedS3, table: castable.Table, empty: int, listed: str, checked: bool) -> dict[str, Any]:
    """Seconds, CPU seconds and requests of one commit of the list, the table first restored."""
    table.refresh().restore(empty)
    event = {"table": table.uri, "file_list": listed, "commit_id": uuid.uuid4().hex, "verify": "footer"}
    with nullcontext() if checked else footers_unchecked():
        result, measured = timed_handler(s3, event)
    assert result["summary"]["files_added"] > 0, result
    return {**measured, "files": result["summary"]["files_added"]}


def timed_handler(s3: ShapedS3, event: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The handler's result on ``event``, and its seconds, CPU seconds and requests."""
    from lambdas import commit as function  # after the environment it reads at import

    s3.reset()
    started, cpu = time.perf_counter(), time.process_time()
    result = function.handler(event, Context())
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return result, {"seconds": seconds, "cpu": cpu, "requests": s3.stats()["requests"]}


def answered_at_once(function_name: str, event: dict[str, Any], client: Any) -> dict[str, Any]:
    """An invocation of the commit function on a slice, answered without checking it (one
    slice's check is timed apart)."""
    start, stop = event["check"]
    return {"checked": stop - start}


def run_split(s3: ShapedS3, table: castable.Table, empty: int, listed: str, files: int) -> dict[str, Any]:
    """One slice's check (at most a slice's entries, from the first) and the commit after the
    slices, the invoked function's own part (the invocations of itself answered at once)."""
    from lambdas import commit as function

    size = min(files, function.CHECK_SLICE_FILES)
    etag = table.store.head(listed).etag
    check = {"table": table.uri, "file_list": listed, "file_list_etag": etag, "commit_id": "bench", "check": [0, size]}
    result, one_slice = timed_handler(s3, check)
    assert result == {"checked": size}, result
    table.refresh().restore(empty)
    event = {"table": table.uri, "file_list": listed, "commit_id": uuid.uuid4().hex, "verify": "footer"}
    in_lambda = {"AWS_LAMBDA_FUNCTION_NAME": "castable-commit", "CASTABLE_CHECK_SLICE_FILES": str(max(1, files // 10))}
    with (
        mock.patch.dict(os.environ, in_lambda),
        mock.patch.object(function, "lambda_client", lambda: None),
        mock.patch.object(function, "invoke", answered_at_once),
    ):
        result, after = timed_handler(s3, event)
    assert result["summary"]["files_added"] == files, result
    return {"slice": {**one_slice, "files": size}, "commit": after}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--latency", type=float, default=0.025)
    parser.add_argument("--out", default=None)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 300 files, 2 repeats")
    args = parser.parse_args()
    if args.quick:
        args.files, args.repeats = 300, 2
    commit_function_environment()
    body = small_parquet_file()
    runs: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    with shaped_s3(latency=args.latency) as s3:
        boto3.client("s3", endpoint_url=s3.direct, region_name="us-east-1").create_bucket(Bucket=BUCKET)
        options = {"endpoint_url": s3.direct, "region": "us-east-1"}
        warm = castable.create_table(f"s3://{BUCKET}/warm-up", SCHEMA, storage_options=options)
        table = castable.create_table(f"s3://{BUCKET}/job", SCHEMA, storage_options=options)
        empty = table.version
        keys = [f"data/job/part-{i:06d}.parquet" for i in range(args.files)]
        put_seconds = put_all(s3, "job", keys, body)
        log(f"put {len(keys):,} objects of {len(body):,} bytes in {put_seconds:.0f} s")
        put_all(s3, "warm-up", keys[:1], body)
        entry, _ = describe_data_file(table.store, keys[0], table.schema)
        listed = write_file_list(table.store, "bench", [replace(entry, path=k) for k in keys], table.schema)
        warm_list = write_file_list(warm.store, "warm", [entry], warm.schema)
        os.environ["AWS_ENDPOINT_URL_S3"] = s3.endpoint  # the function meets S3 with latency
        run(s3, warm, warm.version, warm_list, checked=True)
        for repeat in range(args.repeats):
            for checked in (False, True) if repeat % 2 == 0 else (True, False):
                result = run(s3, table, empty, listed, checked)
                runs[checked].append(result)
                log(
                    f"{'with' if checked else 'without'} the check: {result['seconds']:.1f} s "
                    f"(CPU {result['cpu']:.1f} s), requests {result['requests']}"
                )
        split = run_split(s3, table, empty, listed, args.files)
        for part in ("slice", "commit"):
            log(f"split, {part}: {split[part]['seconds']:.1f} s (CPU {split[part]['cpu']:.1f} s)")
    lines = report_header(
        "file list check",
        f"`python -m bench filelist-check --files {args.files} --repeats {args.repeats} --latency {args.latency}`:"
        f" the commit function's handler, one file list of {args.files:,} files in one directory, S3 = moto"
        f" behind a proxy adding {args.latency * 1000:.0f} ms to every response; medians of {args.repeats}"
        " run(s) each, alternating.",
    )
    without = {k: statistics.median(r[k] for r in runs[False]) for k in ("seconds", "cpu")}
    with_check = {k: statistics.median(r[k] for r in runs[True]) for k in ("seconds", "cpu")}
    lines += [
        "| commit | wall | CPU (this process) | files/s | LIST | HEAD | GET | PUT |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, checked, med in (("without the check (before)", False, without), ("with the check", True, with_check)):
        req = runs[checked][0]["requests"]
        lines.append(
            f"| {label} | {fmt_s(med['seconds'])} | {fmt_s(med['cpu'])} | {args.files / med['seconds']:,.0f} | "
            f"{req.get('LIST', 0):,} | {req.get('HEAD', 0):,} | {req.get('GET', 0):,} | {req.get('PUT', 0):,} |"
        )
    for label, part in (
        (f"one slice's check ({split['slice']['files']:,} files, one invocation)", split["slice"]),
        ("the commit after its slices (the invoked function's own part)", split["commit"]),
    ):
        req = part["requests"]
        lines.append(
            f"| {label} | {fmt_s(part['seconds'])} | {fmt_s(part['cpu'])} | | "
            f"{req.get('LIST', 0):,} | {req.get('HEAD', 0):,} | {req.get('GET', 0):,} | {req.get('PUT', 0):,} |"
        )
    check_seconds = with_check["seconds"] - without["seconds"]
    footers = runs[True][0]["requests"].get("GET", 0) - runs[False][0]["requests"].get("GET", 0)
    # Lambda's CPU is proportional to memory: at 1,024 MB a function has 1024/1769 of a vCPU.
    lambda_cpu = with_check["cpu"] * 1769 / MEMORY_MB
    within = with_check["seconds"] < TIMEOUT and lambda_cpu < TIMEOUT
    scale = TARGET_FILES / args.files  # a smaller run projected linearly (both grow with the files)
    projected, projected_cpu = with_check["seconds"] * scale, lambda_cpu * scale
    lines += [
        "",
        f"The check: {fmt_s(check_seconds)} and {footers:,} footer GETs for {args.files:,} files"
        f" ({check_seconds / args.files * 1000:.2f} ms a file); the commit with it takes"
        f" {with_check['seconds'] / without['seconds']:.2f}x as long as without. Putting the"
        f" {args.files:,} objects into moto beforehand took {put_seconds:.0f} s.",
        "",
        "## Targets",
        "",
        f"- {args.files:,} files checked and committed within the function's timeout ({TIMEOUT} s): wall"
        f" {fmt_s(with_check['seconds'])}, and its CPU scaled to the function's {MEMORY_MB} MB"
        f" ({MEMORY_MB / 1769:.2f} vCPU) {fmt_s(lambda_cpu)}: **{'met' if within else 'missed'}**",
    ]
    if args.files != TARGET_FILES:
        fits = projected < TIMEOUT and projected_cpu < TIMEOUT
        lines.append(
            f"- {TARGET_FILES:,} files, projected linearly from this run: wall {fmt_s(projected)}, CPU at"
            f" {MEMORY_MB} MB {fmt_s(projected_cpu)}: **{'met' if fits else 'missed'}** (projected, not run)"
        )
    from lambdas.commit import CHECK_SLICE_FILES

    # Split: 200,000 files are 10 slices of 20,000 checked at once by as many invocations, then
    # the commit; a slice's time scales to a full one, the commit's own part with the list.
    full_slice = split["slice"]["seconds"] * CHECK_SLICE_FILES / split["slice"]["files"]
    slice_cpu = split["slice"]["cpu"] * CHECK_SLICE_FILES / split["slice"]["files"] * 1769 / MEMORY_MB
    split_commit = split["commit"]["seconds"] * scale
    split_cpu = split["commit"]["cpu"] * scale * 1769 / MEMORY_MB
    split_wall = max(full_slice, slice_cpu) + max(split_commit, split_cpu)  # CPU-bound on Lambda's share
    split_fits = split_wall < TIMEOUT
    lines.append(
        f"- {TARGET_FILES:,} files split as the deployed function splits them ({TARGET_FILES // CHECK_SLICE_FILES}"
        f" slices of {CHECK_SLICE_FILES:,} checked in parallel by invocations of itself, then the commit):"
        f" one slice {fmt_s(full_slice)} (CPU at {MEMORY_MB} MB {fmt_s(slice_cpu)}) plus the commit"
        f" {fmt_s(split_commit)} (CPU {fmt_s(split_cpu)}), about {fmt_s(split_wall)} for the invoked"
        f" function, the larger of wall and CPU of each: **{'met' if split_fits else 'missed'}** (projected"
        " from this run's slice and commit, not run)"
    )
    if args.out:
        publish("filelist_check", lines, Path(args.out))
    else:
        publish("filelist_check", lines)


if __name__ == "__main__":
    main()
