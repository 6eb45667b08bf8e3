"""One configuration of the scaling benchmark, measured in a spawned process of its own."""

from __future__ import annotations

import gc
import json
import math
import multiprocessing as mp
import queue
import resource
import statistics
import time
import traceback
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, TypeVar, cast

import pyarrow as pa

import castable
import castable.format.filelist
from bench.common.benchlib import log, timed
from bench.format.scale_tables import BUCKET, ROWS_PER_FILE, build_table, manifest_written, rows
from castable.format.layout import manifest_key
from castable.format.manifest import Manifest
from castable.read.snapshot import Snapshot
from castable.read.where import parse_predicate
from castable.store import store_from_uri

LOCAL, MOTO = "local", "moto"
STORES = (LOCAL, MOTO)
STORE_NAMES = {LOCAL: "local store", MOTO: "moto S3 over HTTP"}
MIN_MAINTENANCE_VERSIONS = 20
T = TypeVar("T")


def clock(fn: Callable[[], T]) -> tuple[float, T]:
    """benchlib's ``timed``, keeping the result's type."""
    seconds, result = timed(fn)
    return seconds, cast(T, result)


@dataclass(frozen=True)
class Config:
    """One (store, N) to measure, in a process of its own."""

    store: str
    files: int
    form: int
    repeats: int
    budget: float
    versions: int
    uri: str
    endpoint: str | None


@dataclass
class Measured:
    """What one configuration measured (lists hold one value per timed repeat)."""

    store: str
    files: int
    form: int = 1
    build_s: float = math.nan
    manifest_bytes: int = 0
    open_s: list[float] = field(default_factory=list)
    fresh_append_s: list[float] = field(default_factory=list)
    open_append_s: list[float] = field(default_factory=list)
    manifest_written: list[int] = field(default_factory=list)
    bytes_written: list[int] = field(default_factory=list)
    open_scan_s: list[float] = field(default_factory=list)
    scan_s: list[float] = field(default_factory=list)
    scan_files: int = 0
    scan_requests: dict[str, int] = field(default_factory=dict)
    breakdown: dict[str, float] = field(default_factory=dict)
    versions: int = 0
    """Versions made by 1-row appends before the maintenance figures."""
    gc_all_s: float = math.nan
    """``gc(dry_run=True)`` with every version retained."""
    expire_s: float = math.nan
    gc_s: float = math.nan
    """``gc`` after expiring all but the newest version."""
    gc_segments: int = 0
    gc_versions: int = 0
    peak_rss: int = 0
    step: str = "starting"
    capped: list[str] = field(default_factory=list)
    error: str | None = None
    done: bool = False


def repeat(fn: Callable[[], T], repeats: int, deadline: float, what: str, out: Measured) -> list[T]:
    """``fn`` run ``repeats`` times, or fewer (at least once) once ``deadline`` has passed."""
    results: list[T] = []
    for i in range(repeats):
        if i and time.perf_counter() > deadline:
            out.capped.append(f"{what}: {i} of {repeats} repeats")
            break
        results.append(fn())
    return results


def measure(cfg: Config, report: Callable[[Measured], None]) -> Measured:
    """Build the table, then time appends and point scans; ``report`` hears of every finished step."""
    out = Measured(cfg.store, cfg.files, cfg.form)
    options = None if cfg.endpoint is None else {"endpoint_url": cfg.endpoint, "region": "us-east-1"}

    def step(name: str) -> None:
        out.step = name
        out.peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        report(out)

    step("building the table")
    out.build_s, (real, key) = clock(lambda: build_table(cfg.uri, cfg.files, options, cfg.form))
    probe = castable.open_table(cfg.uri, storage_options=options)
    out.manifest_bytes = probe.store.head(manifest_key(probe.version)).size
    scan = probe.scan(filter=f"id = {key}")
    pruned = scan.files()
    out.scan_files = len(pruned)
    if [f.path for f in pruned] != [real.path] or scan.to_arrow().column("id").to_pylist() != [key]:
        raise AssertionError(f"the point scan id = {key} read {[f.path for f in pruned]}, not just {real.path}")
    del probe, scan, pruned
    next_id = (cfg.files + 1) * ROWS_PER_FILE

    def one_row() -> pa.Table:
        nonlocal next_id
        next_id += 1
        return rows(next_id, 1)

    handle: list[castable.Table] = []

    def fresh_append() -> tuple[float, float]:
        t0 = time.perf_counter()
        table = castable.open_table(cfg.uri, storage_options=options)
        t1 = time.perf_counter()
        table.append(one_row())
        t2 = time.perf_counter()
        out.bytes_written.append(table.store.stats.snapshot()["bytes_out"])
        out.manifest_written.append(manifest_written(table))
        handle[:] = [table]
        return t1 - t0, t2 - t0

    step("1-row appends, fresh handle")
    deadline = time.perf_counter() + cfg.budget / 3
    for opened, appended in repeat(fresh_append, cfg.repeats, deadline, "fresh-handle appends", out):
        out.open_s.append(opened)
        out.fresh_append_s.append(appended)

    def open_append() -> float:
        (table,) = handle
        row = one_row()
        before = table.store.stats.snapshot()["bytes_out"]
        seconds, _ = clock(lambda: table.append(row))
        out.bytes_written.append(table.store.stats.snapshot()["bytes_out"] - before)
        out.manifest_written.append(manifest_written(table))
        return seconds

    step("1-row appends, open handle")  # the last fresh handle: current, its entries' JSON encoded once
    deadline = time.perf_counter() + cfg.budget / 3
    out.open_append_s = repeat(open_append, cfg.repeats, deadline, "open-handle appends", out)
    handle.clear()

    def open_scan() -> tuple[float, float]:
        castable.format.filelist.SEGMENTS = castable.format.filelist.SegmentCache()  # cold: no segment read before
        t0 = time.perf_counter()
        table = castable.open_table(cfg.uri, storage_options=options)
        t1 = time.perf_counter()
        found = table.scan(filter=f"id = {key}").to_arrow()
        t2 = time.perf_counter()
        if found.num_rows != 1:
            raise AssertionError(f"the point scan found {found.num_rows} rows")
        out.scan_requests = {k: v for k, v in table.store.stats.snapshot().items() if v}
        return t2 - t0, t2 - t1

    step("open + point scan")
    deadline = time.perf_counter() + cfg.budget / 3
    for total, scanning in repeat(open_scan, cfg.repeats, deadline, "open + point scan", out):
        out.open_scan_s.append(total)
        out.scan_s.append(scanning)

    step("versions for expire and gc")
    maintenance(cfg, options, out, one_row)
    if cfg.form == 1:
        step("where the time goes")
        out.breakdown = breakdown(cfg.uri, options, key, 3 if cfg.files <= 100_000 else 1)
    step("done")
    out.done = True
    return out


def maintenance(cfg: Config, options: dict[str, Any] | None, out: Measured, one_row: Callable[[], pa.Table]) -> None:
    """1-row appends up to ``MAINTENANCE_VERSIONS`` versions (fewer if the time budget ends first),
    then gc with every version retained (dry run), expire to the newest version, and gc."""
    table = castable.open_table(cfg.uri, storage_options=options)
    deadline = time.perf_counter() + cfg.budget / 3
    first = table.version
    while table.version - first < cfg.versions and (
        table.version - first < MIN_MAINTENANCE_VERSIONS or time.perf_counter() < deadline
    ):
        table.append(one_row())
    out.versions = table.version + 1
    castable.format.filelist.SEGMENTS = castable.format.filelist.SegmentCache()
    out.gc_all_s, report = clock(lambda: table.gc(orphan_grace=timedelta(0), dry_run=True))
    out.gc_versions, out.gc_segments = report.versions_scanned, report.segments_scanned
    out.expire_s, _ = clock(lambda: table.expire(retain_versions=1))
    castable.format.filelist.SEGMENTS = castable.format.filelist.SegmentCache()
    out.gc_s, _ = clock(lambda: table.gc(orphan_grace=timedelta(0)))


def breakdown(uri: str, options: dict[str, Any] | None, key: int, repeats: int) -> dict[str, float]:
    """One open's and one commit's manifest work taken apart (medians of ``repeats``): the store
    client, the GET, JSON parse, parse plus the entries' objects (with Python's cyclic garbage
    collector on, as always, and off), pruning for ``id = key``, encoding (entries not yet encoded,
    and cached), and the memory a parsed manifest holds per entry."""
    table = castable.open_table(uri, storage_options=options)
    store, name = table.store, manifest_key(table.version)
    del table

    def median_of(fn: Callable[[], object]) -> float:
        return statistics.median(clock(fn)[0] for _ in range(repeats))

    def without_gc() -> Manifest:
        gc.disable()
        try:
            return Manifest.from_json(data, key=name)
        finally:
            gc.enable()

    get_s, blob = clock(lambda: store.get(name))
    data = blob.data
    manifest = Manifest.from_json(data, key=name)
    predicate = parse_predicate(f"id = {key}", manifest.schema)
    figures = {
        "client": median_of(lambda: store_from_uri(uri, options)),
        "get": get_s,
        "json": median_of(lambda: json.loads(data)),
        "manifest": median_of(lambda: Manifest.from_json(data, key=name)),
        "manifest_no_gc": median_of(without_gc),
        "prune": median_of(lambda: Snapshot(store, manifest).prune_files(predicate)),
    }
    figures["encode_cold"] = statistics.median(clock(fresh.to_json)[0] for fresh in parsed(data, name, repeats))
    manifest.to_json()  # encodes each entry once, as a handle's first commit does
    figures["encode_warm"] = median_of(manifest.to_json)
    figures["entry_bytes"], figures["entry_bytes_encoded"] = memory_per_entry(manifest)
    return figures


def memory_per_entry(manifest: Manifest, sample: int = 10_000) -> tuple[float, float]:
    """Python heap bytes per entry of a parsed manifest (by tracemalloc, over the first ``sample``
    entries), and with each entry's JSON encoding cached, as after a commit on the handle."""
    entries = manifest.data_files[:sample]
    data = replace(manifest, data_files=entries).to_json()
    gc.collect()
    tracemalloc.start()
    try:
        parsed = Manifest.from_json(data, key="sample")
        held = tracemalloc.get_traced_memory()[0]
        parsed.to_json()
        encoded = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return held / len(entries), encoded / len(entries)


def parsed(data: bytes, name: str, count: int) -> Iterator[Manifest]:
    """``count`` manifests parsed from ``data`` one after the other, none of their entries encoded yet."""
    for _ in range(count):
        yield Manifest.from_json(data, key=name)


def child(cfg: Config, results: Any) -> None:
    """A configuration's process: progress and the final result go to ``results`` (a queue)."""
    try:
        measure(cfg, lambda m: results.put(m))
    except BaseException as e:
        failed = Measured(cfg.store, cfg.files, cfg.form, error=f"{type(e).__name__}: {e}")
        results.put(failed)
        traceback.print_exc()


def run_config(cfg: Config, limit: float) -> Measured:
    """Run one configuration in a spawned process; stop it after ``limit`` seconds."""
    context = mp.get_context("spawn")
    results = context.Queue()
    process = context.Process(target=child, args=(cfg, results), name=f"scale-{cfg.store}-{cfg.files}-v{cfg.form}")
    start = time.perf_counter()
    process.start()
    last = Measured(cfg.store, cfg.files, cfg.form)
    try:
        while True:
            try:
                found: Measured = results.get(timeout=1.0)
            except queue.Empty:
                if not process.is_alive():
                    last.error = last.error or f"the process ended (exit code {process.exitcode}) during {last.step}"
                    return last
                if time.perf_counter() - start > limit:
                    last.error = f"stopped after the {limit:.0f} s limit, during {last.step}"
                    return last
                continue
            if found.error is not None:
                found.error = f"{found.error} (during {last.step})"
                return found
            last = found
            log(f"{STORE_NAMES[cfg.store]}, {cfg.files:,} files, format {cfg.form}: {found.step}")
            if found.done:
                return found
    finally:
        if process.is_alive():
            process.terminate()
        process.join(30)
        if process.is_alive():
            process.kill()
            process.join()


def clear_prefix(endpoint: str, prefix: str) -> None:
    """Delete a finished configuration's objects from the moto server (it holds them in memory)."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        for i in range(0, len(keys), 1000):
            client.delete_objects(Bucket=BUCKET, Delete={"Objects": keys[i : i + 1000]})
