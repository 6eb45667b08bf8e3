"""The change feed: ``Table.changes(v, v)`` as the table grows, and against deltalake's and DuckLake's.

1. Flatness. Tables of ``--sizes`` rows (1M, 10M, 100M) in files of 1,000 rows (bench/format/scale_tables.py's
   synthetic event table: 1,000 to 100,000 data files, the many small files of a table between
   compactions, where a version's list of files is largest). Four files in the middle of the key
   space are real, written by ``Table.append``; every other entry is synthetic (its own path,
   ETag and id range, committed in one commit through castable's commit protocol) and its object
   does not exist, so a read that touched one would fail. Then one upsert of ``--keys`` (1,000)
   existing keys, all in the four real files, and ``changes(v, v).to_arrow()`` of its version v:
   opened anew with caches cleared before each repeat, on the local disk and on shaped S3. One
   further, untimed run counts the bytes read by kind of object (pointer, manifests, segments,
   tombstones, data files: the local store's data files through a counting file) and the time
   and segment bytes spent in ``FileList.named``.

2. Peers. A table of ``--rows`` rows (shaped.py's id, ts, value, category), written by each
   system's own writer: castable (``Table.append``), deltalake (``write_deltalake`` with
   ``delta.enableChangeDataFeed=true``) and DuckLake (DuckDB 1.5.5 and its ducklake wheel, from a
   side venv: ``CREATE TABLE AS``). Then the same two upserts of ``--keys`` existing keys in
   each (castable ``upsert``, deltalake ``merge`` matched-update/not-matched-insert, DuckLake
   ``MERGE INTO``): first keys scattered over the table, then a contiguous run of keys. Timed:
   the changes of each upsert's version and of both, read as Arrow with a fresh handle
   (castable: caches cleared and ``open_table``; deltalake: ``DeltaTable`` and ``load_cdf``;
   DuckLake: a new connection, the extension loaded before the clock starts, ATTACH and
   ``table_changes``), on the local disk and on shaped S3 (moto behind bench/common/shaped_s3.py's proxy;
   DuckLake's catalog is a DuckDB file on the local disk, only its data files are on S3), where
   the proxy counts each read's requests and bytes.

Medians of ``--repeats``, every system measured side by side in one run; nothing is asserted.

Usage: python -m bench changes [--sizes 1000000 10000000 100000000]
       [--rows 1000000] [--keys 1000] [--repeats 7] [--latency 0.025] [--bandwidth 90e6]
       [--stores local "shaped S3"] [--duckdb .venv-duckdb15/bin/python] [--quick] [--out DIR]
Writes DIR/changes.md (DIR defaults to bench/results/).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

import castable
from bench.common.benchlib import RESULTS, ROOT, SCHEMA, log, publish, report_header
from bench.common.shaped_s3 import CONTROL, shaped_s3
from bench.format.scale_tables import ROWS_PER_FILE, START_US, US_PER_ID, synthetic_entry
from bench.format.scale_tables import rows as event_rows
from bench.reads.shaped import BUCKET, DUCKDB_PYTHON, Access, counters, data
from castable.commit.change import Change, NextState
from castable.commit.conflicts import Access as ConflictAccess
from castable.commit.protocol import commit_to_table
from castable.format.filelist import DATA, FileList
from castable.format.manifest import Manifest
from castable.store.local import LocalStore
from castable.store.s3 import S3Store

CASTABLE, DELTA, DUCKLAKE = "castable", "deltalake", "DuckLake"
SYSTEMS = (CASTABLE, DELTA, DUCKLAKE)
LOCAL, SHAPED = "local", "shaped S3"
REAL_FILES = 4
"""Real data files of a flatness table: the upsert's keys are all in them."""
PREIMAGE, POSTIMAGE = "update_preimage", "update_postimage"


# ------------------------------------------------------------------------------ counting reads


@dataclass
class Counted:
    """Bytes and requests read, by kind of object, and what ``FileList.named`` cost."""

    bytes: Counter[str] = field(default_factory=Counter)
    requests: Counter[str] = field(default_factory=Counter)
    named_seconds: float = 0.0
    named_bytes: int = 0
    named_calls: int = 0
    inside_named: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, key: str, n: int, request: bool = True) -> None:
        kind = kind_of(key)
        with self.lock:
            self.bytes[kind] += n
            self.requests[kind] += request
            if self.inside_named and kind == "segment":
                self.named_bytes += n


def kind_of(key: str) -> str:
    if key.endswith("_latest_manifest"):
        return "pointer"
    for prefix in ("manifest", "segment", "tombstone", "data"):
        if key.startswith(f"{prefix}/") or f"/{prefix}/" in key:
            return prefix
    return "other"


class CountingFile(io.RawIOBase):
    """A local data file read through Python, counting the bytes Arrow reads of it."""

    def __init__(self, native: pa.NativeFile, key: str, counted: Counted) -> None:
        super().__init__()
        self.native, self.key, self.counted = native, key, counted

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return int(self.native.seek(offset, whence))

    def tell(self) -> int:
        return int(self.native.tell())

    def read(self, size: int = -1) -> bytes:
        data = self.native.read(None if size is None or size < 0 else size)
        self.counted.add(self.key, len(data), request=False)
        return bytes(data)

    def close(self) -> None:
        self.native.close()
        super().close()


@contextmanager
def counting() -> Iterator[Counted]:
    """Count every object read (store GETs, and local data files' bytes) while the block runs."""
    counted = Counted()
    local_get, s3_get, local_open, named = LocalStore.get, S3Store.get, LocalStore.open_input, FileList.named

    def getter(original: Callable[..., Any]) -> Callable[..., Any]:
        def get(self: Any, key: str, **kwargs: Any) -> Any:
            blob = original(self, key, **kwargs)
            counted.add(key, len(blob.data))
            return blob

        return get

    def open_input(self: LocalStore, key: str, **kwargs: Any) -> pa.NativeFile:
        counted.add(key, 0)
        return pa.PythonFile(CountingFile(local_open(self, key, **kwargs), key, counted), mode="r")

    def timed_named(self: FileList[Any], paths: Any) -> Any:
        with counted.lock:
            counted.inside_named += 1
            counted.named_calls += 1
        started = time.perf_counter()
        try:
            return named(self, paths)
        finally:
            with counted.lock:
                counted.inside_named -= 1
                counted.named_seconds += time.perf_counter() - started

    LocalStore.get, S3Store.get = getter(local_get), getter(s3_get)  # type: ignore[method-assign]
    LocalStore.open_input = open_input  # type: ignore[method-assign,assignment]
    FileList.named = timed_named  # type: ignore[method-assign]
    try:
        yield counted
    finally:
        LocalStore.get, S3Store.get, LocalStore.open_input = local_get, s3_get, local_open  # type: ignore[method-assign]
        FileList.named = named  # type: ignore[method-assign]


# ------------------------------------------------------------------------------ 1. flatness


def upsert_rows(keys: np.ndarray) -> pa.Table:
    """New rows for ``keys`` of the synthetic event table (category ``updated``)."""
    batch = event_rows(0, len(keys))
    times = pa.array(START_US + keys * US_PER_ID, SCHEMA.field("event_time").type)
    category = pa.array(["updated"] * len(keys))
    return pa.table([pa.array(keys), times, batch.column("payload"), category], schema=SCHEMA)


def build_flat(uri: str, rows: int, keys: int, options: dict[str, str] | None) -> tuple[int, str]:
    """A table of ``rows`` rows (``REAL_FILES`` real files, the rest synthetic entries) and one
    upsert of ``keys`` keys of the real files; returns the upsert's version and the layout."""
    files = rows // ROWS_PER_FILE
    table = castable.create_table(uri, SCHEMA, primary_key="id", storage_options=options)
    first = files // 2 - REAL_FILES // 2
    for i in range(REAL_FILES):
        table.append(event_rows((first + i) * ROWS_PER_FILE, ROWS_PER_FILE))
    real = list(table.manifest.data_files)
    before = tuple(synthetic_entry(real[0], i) for i in range(first))
    after = tuple(synthetic_entry(real[0], i) for i in range(first + REAL_FILES, files))
    added = len(before) + len(after)

    def build(base: Manifest) -> NextState:
        return NextState(
            data_files=FileList.of(DATA, base.schema, [*before, *base.data_files, *after]),
            tombstones=base.tombstones,
            summary={"rows_added": added * ROWS_PER_FILE, "files_added": added, "bench_synthetic_entries": True},
        )

    if added:
        change = Change("append", build, ConflictAccess(), across_schema=True)
        commit_to_table(table.store, table.manifest, change, commit_id=str(uuid.uuid4()))
    table = castable.open_table(uri, storage_options=options)
    picked = np.random.default_rng(5).choice(REAL_FILES * ROWS_PER_FILE, keys, replace=False)
    version = table.upsert(upsert_rows(np.sort(picked) + first * ROWS_PER_FILE))
    manifest = table.refresh().manifest
    segments = len(manifest.data_files.parts)
    layout = f"{len(manifest.data_files):,} data files in {segments} segment(s)"
    return version, layout


def read_changes(uri: str, first: int, last: int, options: dict[str, str] | None) -> pa.Table:
    """A fresh handle's changes of ``first..last`` (caches cleared: a cold read)."""
    castable.clear_caches()
    return castable.open_table(uri, storage_options=options).changes(first, last).to_arrow()


def kinds_of(table: pa.Table, column: str) -> dict[str, int]:
    return {str(r["values"]): int(r["counts"]) for r in pc.value_counts(table.column(column)).to_pylist()}


def timed_runs(
    fn: Callable[[], pa.Table], repeats: int, control: str | None, column: str = "_change_type"
) -> list[list[Any]]:
    """Each repeat's [seconds, proxy counters, rows, change types]."""
    runs = []
    for _ in range(repeats):
        counters(control, reset=True)
        started = time.perf_counter()
        out = fn()
        seconds = time.perf_counter() - started
        runs.append([seconds, counters(control), out.num_rows, kinds_of(out, column)])
    return runs


def measure_flat(uri: str, version: int, options: dict[str, str] | None, control: str | None, repeats: int) -> dict:
    runs = timed_runs(lambda: read_changes(uri, version, version, options), repeats, control)
    with counting() as counted:
        started = time.perf_counter()
        read_changes(uri, version, version, options)
        seconds = time.perf_counter() - started
    return {
        "runs": runs,
        "bytes": dict(counted.bytes),
        "requests": dict(counted.requests),
        "named_seconds": counted.named_seconds,
        "named_bytes": counted.named_bytes,
        "named_calls": counted.named_calls,
        "counted_seconds": seconds,
    }


# ------------------------------------------------------------------------------ 2. peers


@dataclass
class Peers:
    """Where each system's table is, from one store, and its versions after each upsert."""

    castable_uri: str
    delta_uri: str
    ducklake_dir: Path
    ducklake_data: str
    versions: dict[str, list[int]] = field(default_factory=dict)
    layout: dict[str, str] = field(default_factory=dict)
    upsert_seconds: dict[str, list[float]] = field(default_factory=dict)


def sources(rows: int, keys: int) -> list[pa.Table]:
    """The two upserts: ``keys`` existing keys scattered over the table, then a contiguous run."""
    scattered = np.sort(np.random.default_rng(11).choice(rows, keys, replace=False))
    lo = rows // 3
    run = np.arange(lo, lo + keys, dtype=np.int64)
    out = []
    for ids in (scattered, run):
        base = data(keys)
        out.append(
            base.set_column(0, base.schema.field("id"), pa.array(ids.astype(np.int64)))
            .set_column(2, "value", pc.add(base.column("value"), 1.0))
            .set_column(3, "category", pa.array(["updated"] * keys))
        )
    return out


def build_peers(peers: Peers, access: Access | None, endpoint: str, work: Path, args: argparse.Namespace) -> None:
    """Each system writes the base table, then runs both upserts."""
    base, upserts = work / "base.parquet", [work / f"upsert-{i}.parquet" for i in range(2)]
    c_options = access.castable() if access else None
    d_options = access.delta() if access else None
    table = castable.create_table(peers.castable_uri, data(0).schema, primary_key="id", storage_options=c_options)
    table.append(pq.read_table(base))
    versions, seconds = [], []
    for path in upserts:
        started = time.perf_counter()
        versions.append(table.upsert(pq.read_table(path)))
        seconds.append(time.perf_counter() - started)
    peers.versions[CASTABLE], peers.upsert_seconds[CASTABLE] = versions, seconds
    m = table.refresh().manifest
    groups = sum(f.row_groups for f in m.data_files)
    peers.layout[CASTABLE] = (
        f"{len(m.data_files)} data file(s), {groups} row groups, {m.data_files.total('size') / 1e6:.1f} MB, "
        f"{len(m.tombstones)} tombstone(s)"
    )
    write_deltalake(
        peers.delta_uri,
        pq.read_table(base),
        storage_options=d_options,
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    versions, seconds = [], []
    for path in upserts:
        started = time.perf_counter()
        (
            DeltaTable(peers.delta_uri, storage_options=d_options)
            .merge(pq.read_table(path), predicate="t.id = s.id", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        seconds.append(time.perf_counter() - started)
        versions.append(DeltaTable(peers.delta_uri, storage_options=d_options).version())
    peers.versions[DELTA], peers.upsert_seconds[DELTA] = versions, seconds
    files = DeltaTable(peers.delta_uri, storage_options=d_options).file_uris()
    peers.layout[DELTA] = f"{len(files)} live data file(s), change data in _change_data/ files"
    built = ducklake(
        args.duckdb,
        "build",
        peers,
        endpoint,
        ["--base", str(base), "--sources", *map(str, upserts)],
    )
    peers.versions[DUCKLAKE] = [s for s, _ in built["snapshots"]]
    peers.upsert_seconds[DUCKLAKE] = [t for _, t in built["snapshots"]]
    peers.layout[DUCKLAKE] = f"{built['layout']} (DuckDB {built['duckdb']}, catalog a local DuckDB file)"


def ducklake(python: Path, mode: str, peers: Peers, endpoint: str, extra: list[str]) -> dict[str, Any]:
    command = [
        str(python),
        "-m",
        "bench.reads.ducklake_changes",
        mode,
        *("--dir", str(peers.ducklake_dir), "--data-path", peers.ducklake_data),
        *(("--endpoint", endpoint) if endpoint else ()),
        *extra,
    ]
    found = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if found.returncode:
        raise RuntimeError(f"DuckLake's {mode} failed:\n{found.stderr[-3000:]}")
    return json.loads(found.stdout)  # type: ignore[no-any-return]


RANGES = ("scattered", "run", "both")
RANGE_TITLES = {
    "scattered": "the upsert of {keys:,} scattered keys (1 version)",
    "run": "the upsert of a run of {keys:,} keys (1 version)",
    "both": "both upserts (2 versions)",
}


def bounds(versions: list[int], which: str) -> tuple[int, int]:
    return {
        "scattered": (versions[0], versions[0]),
        "run": (versions[1], versions[1]),
        "both": (versions[0], versions[1]),
    }[which]


def measure_peers(
    peers: Peers, access: Access | None, endpoint: str, control: str | None, args: argparse.Namespace
) -> dict[str, dict[str, list[list[Any]]]]:
    """Each system's runs of each change range."""
    out: dict[str, dict[str, list[list[Any]]]] = {}
    c_options = access.castable() if access else None
    versions = peers.versions[CASTABLE]
    out[CASTABLE] = {
        r: timed_runs(partial(read_changes, peers.castable_uri, *bounds(versions, r), c_options), args.repeats, control)
        for r in RANGES
    }
    d_options = access.delta() if access else None
    d_versions = peers.versions[DELTA]

    def cdf(which: str) -> pa.Table:
        first, last = bounds(d_versions, which)
        found = DeltaTable(peers.delta_uri, storage_options=d_options).load_cdf(
            starting_version=first, ending_version=last
        )
        return pa.RecordBatchReader.from_stream(found).read_all()

    out[DELTA] = {r: timed_runs(partial(cdf, r), args.repeats, control) for r in RANGES}
    s = peers.versions[DUCKLAKE]
    ranges = [":".join(map(str, bounds(s, r))) for r in RANGES]
    extra = ["--ranges", *ranges, "--repeats", str(args.repeats), *(("--control", control) if control else ())]
    found = ducklake(args.duckdb, "measure", peers, endpoint, extra)
    out[DUCKLAKE] = {r: found[key] for r, key in zip(RANGES, ranges, strict=True)}
    return out


# ------------------------------------------------------------------------------ the report


def med(runs: list[list[Any]]) -> float:
    return statistics.median(r[0] for r in runs)


def median_run(runs: list[list[Any]]) -> list[Any]:
    return sorted(runs, key=lambda r: r[0])[len(runs) // 2]


def fmt(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def fmt_bytes(n: float) -> str:
    for unit, size in (("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,.0f} B"


def spread(runs: list[list[Any]]) -> str:
    seconds = [r[0] for r in runs]
    return f"**{fmt(statistics.median(seconds))}** ({fmt(min(seconds))}-{fmt(max(seconds))})"


def expected_kinds(keys: int, which: str) -> dict[str, int]:
    n = 2 * keys if which == "both" else keys
    return {PREIMAGE: n, POSTIMAGE: n}


def cpu_busy() -> float:
    """Seconds of CPU the whole machine has spent busy since boot (/proc/stat)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return float("nan")
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    """CPU seconds of this process and its reaped children (moto, the proxy, DuckLake's runs)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def report(
    flat: dict[tuple[str, int], dict[str, Any]],
    layouts: dict[tuple[str, int], str],
    peers: dict[str, dict[str, dict[str, list[list[Any]]]]],
    built: dict[str, Peers],
    args: argparse.Namespace,
    command: str,
    elapsed: float,
    others: float,
) -> list[str]:
    lines = report_header(
        "change feed",
        f"`{command}` took {elapsed / 60:.1f} min, castable at {_commit()}. deltalake {_version('deltalake')}; "
        f"DuckLake from the side venv {args.duckdb.parent.parent.name}.",
    )
    lines += [
        f"Conditions: shaped S3 is moto behind bench/common/shaped_s3.py's proxy, **{args.latency * 1000:g} ms** "
        f"before each response and **{args.bandwidth / 1e6:g} MB/s** per connection; the local disk is this "
        f"machine's. Besides this run's own processes (moto, the proxy, DuckLake's), the machine's other "
        f"processes kept **{others:.2f}** of its {os.cpu_count()} cores busy on average during the run "
        "(/proc/stat less this run's CPU time). Every read is cold: a fresh handle with caches cleared "
        f"(DuckLake: a new connection). Medians of {args.repeats} (min-max).",
        "",
        "## Flatness: the changes of one upsert as the table grows",
        "",
        f"`changes(v, v).to_arrow()` of an upsert of {args.keys:,} existing keys, all in {REAL_FILES} real "
        f"files of {ROWS_PER_FILE:,} rows in the middle of the key space; every other entry is a synthetic "
        f"file of {ROWS_PER_FILE:,} rows whose object does not exist. Bytes read and requests are "
        "counted in one further run, by kind of object (the local store's data files through a "
        "counting file, on S3 the store's GETs; on S3, the most requests in flight at once are the "
        "proxy's for the median run); *in FileList.named* is the time and segment bytes "
        "of that run spent looking up the entries of the files the version's tombstones name "
        "(src/castable/read/changes.py `_deleted_from`).",
        "",
        "| store | table rows | layout | changes of the upsert | change rows | bytes read | "
        "pointer + manifests | segments | tombstones | data files | requests (most in flight) | in FileList.named |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for (store, size), got in flat.items():
        b = got["bytes"]
        counted = got["requests"]
        middle = median_run(got["runs"])
        rows = f"{middle[2]:,}" + ("" if middle[3] == expected_kinds(args.keys, "run") else f" ({middle[3]})")
        flight = f" ({middle[1]['peak_in_flight']})" if middle[1] else ""
        lines.append(
            f"| {store} | {size:,} | {layouts[(store, size)]} | {spread(got['runs'])} | {rows} "
            f"| **{fmt_bytes(sum(b.values()))}** | {fmt_bytes(b.get('pointer', 0) + b.get('manifest', 0))} "
            f"| {fmt_bytes(b.get('segment', 0))} | {fmt_bytes(b.get('tombstone', 0))} | {fmt_bytes(b.get('data', 0))} "
            f"| {sum(counted.values())}{flight} | {fmt(got['named_seconds'])}, {fmt_bytes(got['named_bytes'])} |"
        )
    targets = []
    for store in dict.fromkeys(s for s, _ in flat):
        sizes = sorted(n for s, n in flat if s == store)
        small, large = flat[(store, sizes[0])], flat[(store, sizes[-1])]
        growth_b = sum(large["bytes"].values()) / max(1, sum(small["bytes"].values()))
        growth_t = med(large["runs"]) / med(small["runs"])
        named = large["named_bytes"] / max(1, sum(large["bytes"].values()))
        span = f"{sizes[0]:,} to {sizes[-1]:,} rows"
        targets.append(
            f"- {store}: the bytes one upsert's changes read stay flat from {span} (within 1.5x): "
            f"**{'met' if growth_b <= 1.5 else 'missed'}** ({growth_b:.1f}x: "
            f"{fmt_bytes(sum(small['bytes'].values()))} to {fmt_bytes(sum(large['bytes'].values()))}; "
            f"at {sizes[-1]:,} rows {named:.0%} of them are segments `FileList.named` reads)"
        )
        targets.append(
            f"- {store}: their time stays flat from {span} (within 1.5x): "
            f"**{'met' if growth_t <= 1.5 else 'missed'}** ({growth_t:.2f}x: {fmt(med(small['runs']))} to "
            f"{fmt(med(large['runs']))}; {fmt(large['named_seconds'])} of the counted run in `FileList.named`)"
        )
    lines += [
        "",
        "## Against deltalake and DuckLake: the same table, the same upserts",
        "",
        f"{args.rows:,} rows (id, ts, value, category) written by each system's writer, then an upsert of "
        f"{args.keys:,} existing keys scattered over the table and an upsert of a run of {args.keys:,} "
        "consecutive keys. Each row: one change range read as Arrow, cold; *MB read* and *requests* "
        "are the proxy's for the median run (shaped S3 only); *castable / this* is castable's median "
        "over the system's (above 1: castable is slower).",
        "",
    ]
    for store, p in built.items():
        lines += [f"Layout on {store}:", ""]
        lines += [f"- {s}: {text}" for s, text in p.layout.items()]
        upserts = "; ".join(
            f"{s} {' and '.join(fmt(t) for t in p.upsert_seconds[s])}" for s in SYSTEMS if s in p.upsert_seconds
        )
        lines += [f"- the two upserts took: {upserts}", ""]
    lines += [
        "| store | change range | system | time | rows | change types as expected | MB read "
        "| requests (most in flight) | castable / this |",
        "| --- | --- | --- | ---: | ---: | --- | ---: | ---: | ---: |",
    ]
    ratios = []
    for store, found in peers.items():
        for which in RANGES:
            title = RANGE_TITLES[which].format(keys=args.keys)
            subject = med(found[CASTABLE][which])
            for system in SYSTEMS:
                runs = found[system][which]
                middle = median_run(runs)
                stats = middle[1]
                requests = sum(stats.get("requests", {}).values()) if stats else None
                expected = "yes" if middle[3] == expected_kinds(args.keys, which) else f"no: {json.dumps(middle[3])}"
                read = f"{stats['bytes_out'] / 1e6:.2f} | {requests} ({stats['peak_in_flight']})" if stats else "- | -"
                lines.append(
                    f"| {store} | {title} | {system} | {spread(runs)} | {middle[2]:,} | {expected} | {read} "
                    f"| {subject / med(runs):.2f}x |"
                )
            best = min((s for s in SYSTEMS if s != CASTABLE), key=lambda s: med(found[s][which]))
            ratio = subject / med(found[best][which])
            ratios.append((store, title, subject, best, med(found[best][which]), ratio))
    lines += [
        "",
        "### castable / fastest peer",
        "",
        "| store | change range | castable | fastest peer | its time | castable / fastest peer |",
        "| --- | --- | ---: | --- | ---: | ---: |",
    ]
    for store, title, subject, best, theirs, ratio in ratios:
        lines.append(f"| {store} | {title} | {fmt(subject)} | {best} | {fmt(theirs)} | **{ratio:.2f}x** |")
        targets.append(
            f"- {store}, {title}: castable at least as fast as the fastest peer ({best}): "
            f"**{'met' if ratio <= 1 else 'missed'}** ({ratio:.2f}x its time)"
        )
    lines += ["", "## Targets", "", *targets]
    return lines


def _commit() -> str:
    """The commit castable's source is at, and whether src/ differs from it."""
    found = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if found.returncode:
        return "an unknown commit"
    dirty = subprocess.run(["git", "status", "--porcelain", "src"], cwd=ROOT, capture_output=True, text=True).stdout
    return f"commit {found.stdout.strip()}" + (" with uncommitted changes in src/" if dirty.strip() else "")


def _version(module: str) -> str:
    from importlib.metadata import version

    return version(module)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000, 100_000_000])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the table the systems share")
    parser.add_argument("--keys", type=int, default=1000, help="keys each upsert replaces")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--latency", type=float, default=0.025)
    parser.add_argument("--bandwidth", type=float, default=90e6)
    parser.add_argument("--stores", nargs="+", default=[LOCAL, SHAPED], choices=[LOCAL, SHAPED])
    parser.add_argument("--duckdb", type=Path, default=DUCKDB_PYTHON)
    parser.add_argument("--quick", action="store_true", help="tables of 100,000 and 1,000,000 rows, 2 repeats")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.rows, args.repeats = [100_000, 1_000_000], 100_000, 2
    if any(n % ROWS_PER_FILE or n < REAL_FILES * ROWS_PER_FILE for n in args.sizes):
        sys.exit(f"--sizes must be multiples of {ROWS_PER_FILE:,} of at least {REAL_FILES * ROWS_PER_FILE:,}")
    if args.keys > min(REAL_FILES * ROWS_PER_FILE, args.rows // 3):
        sys.exit("--keys must fit in the real files of the flatness tables and in a third of --rows")
    if not args.duckdb.exists():
        sys.exit(f"{args.duckdb} is missing: `make .venv-duckdb15/.installed` makes the side venv with DuckDB 1.5.5")
    command = " ".join(["python -m bench changes", *sys.argv[1:]])
    started, busy, mine = time.perf_counter(), cpu_busy(), own_cpu()
    flat: dict[tuple[str, int], dict[str, Any]] = {}
    layouts: dict[tuple[str, int], str] = {}
    peers: dict[str, dict[str, dict[str, list[list[Any]]]]] = {}
    built: dict[str, Peers] = {}
    with tempfile.TemporaryDirectory() as temp, shaped_s3(args.latency, args.bandwidth) as s3:
        work = Path(temp)
        boto3.client("s3", endpoint_url=s3.direct, region_name="us-east-1").create_bucket(Bucket=BUCKET)
        direct, shaped = Access(s3.direct, ""), Access(s3.endpoint, "")
        control = f"{s3.endpoint}{CONTROL}"
        for store in args.stores:
            for size in args.sizes:
                log(f"flatness, {store}: {size:,} rows")
                if store == LOCAL:
                    uri, build_options, options, proxy = f"{work}/flat-{size}", None, None, None
                else:
                    uri, build_options, options = f"s3://{BUCKET}/flat-{size}", direct.castable(), shaped.castable()
                    proxy = control
                version, layouts[(store, size)] = build_flat(uri, size, args.keys, build_options)
                flat[(store, size)] = measure_flat(uri, version, options, proxy, args.repeats)
                log(f"  {fmt(med(flat[(store, size)]['runs']))}, {flat[(store, size)]['bytes']}")
        table = data(args.rows)
        pq.write_table(table, work / "base.parquet")
        for i, upsert in enumerate(sources(args.rows, args.keys)):
            pq.write_table(upsert, work / f"upsert-{i}.parquet")
        del table
        for store in args.stores:
            log(f"peers, {store}: writing {args.rows:,} rows and two upserts of {args.keys:,} keys in each system")
            if store == LOCAL:
                p = Peers(f"{work}/castable", f"{work}/delta", work / "ducklake-local", f"{work}/ducklake-local/data/")
                build_peers(p, None, "", work, args)
                built[store] = p
                peers[store] = measure_peers(p, None, "", None, args)
            else:
                p = Peers(
                    f"s3://{BUCKET}/castable", f"s3://{BUCKET}/delta", work / "ducklake-s3", f"s3://{BUCKET}/ducklake/"
                )
                build_peers(p, direct, s3.direct, work, args)
                built[store] = p
                peers[store] = measure_peers(p, shaped, s3.endpoint, control, args)
            for which in RANGES:
                log(f"  {which}: " + ", ".join(f"{s} {fmt(med(peers[store][s][which]))}" for s in SYSTEMS))
    elapsed = time.perf_counter() - started
    others = max(0.0, (cpu_busy() - busy) - (own_cpu() - mine)) / elapsed
    publish("changes", report(flat, layouts, peers, built, args, command, elapsed, others), args.out)


if __name__ == "__main__":
    main()
