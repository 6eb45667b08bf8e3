"""What changes.py measures: castable's reads of its changes as the table grows (counting the bytes
read by kind of object), and the same table and upserts written and read by castable, deltalake
and DuckLake (DuckLake's side in the DuckDB 1.5 venv, ducklake_changes.py). Not a benchmark itself.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

import castable
from bench.common.benchlib import ROOT, SCHEMA
from bench.format.scale_tables import ROWS_PER_FILE, START_US, US_PER_ID, synthetic_entry
from bench.format.scale_tables import rows as event_rows
from bench.reads.shaped import Access, counters, data
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
    version = table.upsert(upsert_rows(np.sort(picked) + first * ROWS_PER_FILE)).version
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
        versions.append(table.upsert(pq.read_table(path)).version)
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
"""The change ranges each system reads: each upsert's version, and both."""


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
