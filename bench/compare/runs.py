"""The sections of a run: each times its operations on every system, taking turns, into the results."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

import pyarrow as pa

import castable
from bench.common.benchlib import SCHEMA, event_batches, fmt_s, log, moto_server, timed
from bench.compare.results import (
    APPEND,
    COMMIT,
    COMPACT,
    FILTERED,
    FLOOR,
    FULL,
    NEW_ROWS,
    RANGE,
    REFERENCE,
    REPLACE,
    S3_FILTERED,
    S3_FULL,
    SCATTERED,
    SMALL_ROWS,
    UPSERT,
    UPSERTED_SCAN,
    UPSERTS,
    Results,
)
from bench.compare.systems import Castable, Reader, System, castable_readers, pyarrow_reader
from bench.compare.workloads import (
    delete_cases,
    generate,
    replace_cases,
    scan_range,
    upsert_count,
    upsert_rows,
    write_parquet,
)


def tree_state(root: Path) -> dict[str, tuple[int, int]]:
    """Size and mtime of every file under ``root``: compared before and after an operation."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            st = os.stat(os.path.join(dirpath, name))
            out[os.path.join(dirpath, name)] = (st.st_size, st.st_mtime_ns)
    return out


def written_since(before: dict[str, tuple[int, int]], root: Path) -> int:
    """Bytes of files new or changed since ``before``."""
    after = tree_state(root)
    return sum(st[0] for p, st in after.items() if before.get(p) != st)


def measure_write(
    system: System, root: Path, op: str, rows: int, operation: Callable[[], object], results: Results
) -> float:
    """Time one write to the table at ``root`` (its handle already opened) after os.sync(); keep the
    bytes it wrote and how many of the table's data files it removed (rewrote or dropped)."""
    before, live = tree_state(root), system.live_files(root)
    os.sync()
    seconds, _ = timed(operation)
    res = results.get(op, rows, system.name, system.name, system.role)
    res.times.append(seconds)
    res.written.append(written_since(before, root))
    res.rewritten.append(len(live - system.live_files(root)))
    return seconds


def run_size(systems: list[System], rows: int, repeats: int, results: Results, sections: list[str]) -> None:
    """The sections run for each table size, on one copy of the table held in memory."""
    log(f"{rows:,} rows: generating")
    data = generate(rows)
    if "deletes" in sections:
        run_deletes(systems, data, repeats, results)
    if "writes" in sections:
        run_writes(systems, data, repeats, results)


def run_deletes(systems: list[System], data: pa.Table, repeats: int, results: Results) -> None:
    """Appends, deletes on fresh tables (every delete runs on a table appended just before), then scans."""
    rows = data.num_rows
    cases = delete_cases(rows, repeats)
    kept: dict[str, Path] = {}
    for r, (scattered, key_range) in enumerate(cases):
        for system in systems:
            took: dict[str, float] = {}
            for op, case in ((SCATTERED, scattered), (RANGE, key_range)):
                root = system.work / f"t{rows}_r{r}_{'s' if op == SCATTERED else 'k'}"
                append = system.appender(root, data)
                os.sync()
                seconds, _ = timed(append)
                took[f"append for {op}"] = seconds
                res = results.get(APPEND, rows, system.name, system.name, system.role)
                res.times.append(seconds)
                res.written.append(written_since({}, root))
                took[op] = measure_write(system, root, op, rows, system.deleter(root, case), results)
                if op == SCATTERED and r == repeats - 1:
                    kept[system.name] = root
                else:
                    system.drop(root)
            done = ", ".join(f"{op} {fmt_s(s)}" for op, s in took.items())
            log(f"{rows:,} rows, repeat {r + 1}/{repeats}, {system.name}: {done}")
    for system in systems:
        system.deleter(kept[system.name], cases[0][1])()
    run_scans(systems, kept, rows, repeats, results)
    for system in systems:
        system.drop(kept[system.name])


def run_writes(systems: list[System], data: pa.Table, repeats: int, results: Results) -> None:
    """Upserts and replace-wheres on one table per system, appended untimed first; each repeat upserts
    other keys and replaces another 1% slice, systems taking turns, then the live rows must agree.
    Also times writing each upsert's rows alone as one Parquet file: the least an upsert can write."""
    rows = data.num_rows
    roots = {s.name: s.work / f"w{rows}" for s in systems}
    for system in systems:
        system.appender(roots[system.name], data)()
    alone = systems[0].work.parent / "new-rows.parquet"
    for r, (new_rows, case) in enumerate(zip(upsert_rows(rows, repeats), replace_cases(rows, repeats), strict=True)):
        for system in systems:
            root = roots[system.name]
            up = measure_write(system, root, UPSERT, rows, system.upserter(root, new_rows), results)
            rep = measure_write(system, root, REPLACE, rows, system.replacer(root, case), results)
            log(f"{rows:,} rows, repeat {r + 1}/{repeats}, {system.name}: {UPSERT} {fmt_s(up)}, {REPLACE} {fmt_s(rep)}")
        res = results.get(UPSERT, rows, NEW_ROWS, "pyarrow", REFERENCE)
        os.sync()
        res.times.append(timed(partial(write_parquet, alone, new_rows, systems[0].layout))[0])
        res.written.append(alone.stat().st_size)
        alone.unlink()
    live = {s.name: s.readers(roots[s.name], 0, 0)[0].full().num_rows for s in systems}
    expected = rows + repeats * (upsert_count(rows) // 2)
    if set(live.values()) != {expected}:
        raise AssertionError(f"live rows after the writes: {live}, expected {expected:,} each")
    for system in systems:
        system.drop(roots[system.name])


def run_compaction(system: Castable, rows: int, upserts: int, repeats: int, results: Results) -> None:
    """castable's full scan after ``upserts`` upserts against the same table after compact(): a
    handle opened before the compaction keeps reading the uncompacted version, so the scans of the
    two versions take turns (their row counts checked equal)."""
    root = system.work / "upserted"
    log(f"compaction: {rows:,} rows, then {upserts} upserts")
    system.appender(root, generate(rows))()
    for new_rows in upsert_rows(rows, upserts):
        measure_write(system, root, UPSERTS, rows, system.upserter(root, new_rows), results)
    times = results.get(UPSERTS, rows, system.name, system.name, system.role).times
    spread = f"first {fmt_s(times[0])}, median {fmt_s(statistics.median(times))}, last {fmt_s(times[-1])}"
    log(f"compaction: {upserts} upserts, {spread}")
    lo, hi = scan_range(rows)
    before = system.readers(root, lo, hi)
    subject, floor = before[0], before[-1]  # castable's own scan and the floor (the cold-cache reader aside)
    seconds = measure_write(system, root, COMPACT, rows, system.compactor(root), results)
    log(f"compaction: compact() in {fmt_s(seconds)}")
    compacted = system.readers(root, lo, hi)[0]
    readers = [
        replace(subject, name=f"castable, after {upserts} upserts"),
        replace(compacted, name=f"castable, after {upserts} upserts and compact()", role=REFERENCE),
        floor,
    ]
    take_turns(UPSERTED_SCAN, rows, readers, repeats, results)
    system.drop(root)


def run_scans(systems: list[System], roots: dict[str, Path], rows: int, repeats: int, results: Results) -> None:
    """The full and the filtered scan of every reader of every system's table."""
    lo, hi = scan_range(rows)
    readers = [reader for s in systems for reader in s.readers(roots[s.name], lo, hi)]
    for op in (FULL, FILTERED):
        take_turns(op, rows, readers, repeats, results)


def take_turns(op: str, rows: int, readers: list[Reader], repeats: int, results: Results) -> None:
    """Every reader's scan once to warm up and check row counts (all but the floor's must agree), then
    ``repeats`` rounds, readers interleaved. ``op`` is the filtered scan or a full one."""

    def scan(reader: Reader) -> Callable[[], pa.Table]:
        return reader.filtered if op in (FILTERED, S3_FILTERED) else reader.full

    counts = {}
    for reader in readers:
        res = results.get(op, rows, reader.name, reader.family, reader.role)
        res.rows_out = counts[reader.name] = scan(reader)().num_rows
    live = {counts[r.name] for r in readers if r.role != FLOOR}
    if len(live) != 1:
        raise AssertionError(f"{op}: readers disagree on the live rows: {counts}")
    for i in range(repeats):
        for reader in readers:
            results.get(op, rows, reader.name, reader.family, reader.role).times.append(timed(scan(reader))[0])
        log(f"{rows:,} rows, {op}, round {i + 1}/{repeats}")


def run_commits(systems: list[System], commits: list[int], repeats: int, results: Results) -> None:
    """Small appends on fresh tables; at each checkpoint the next ``repeats`` appends are timed, interleaved."""
    small = pa.Table.from_batches(list(event_batches(SMALL_ROWS, seed=1)), schema=SCHEMA)
    appenders = {s.name: s.small_appender(s.work / "commits", small) for s in systems}
    done = 0
    for target in sorted(commits):
        for system in systems:
            t0 = time.perf_counter()
            for _ in range(target - done):
                appenders[system.name]()
            log(f"commits: {system.name} advanced to {target:,} in {time.perf_counter() - t0:.1f} s")
        for _ in range(repeats):
            for system in systems:
                res = results.get(COMMIT, target, system.name, system.name, system.role)
                os.sync()
                res.times.append(timed(appenders[system.name])[0])
        done = target + repeats
    for system in systems:
        system.drop(system.work / "commits")


def run_s3(rows: int, repeats: int, results: Results) -> list[tuple[str, float, dict[str, int]]]:
    """castable on a moto S3 server over HTTP: wall time, requests and bytes of each operation;
    then its scans and pyarrow's S3 filesystem reading the same files, taking turns."""
    import boto3
    from pyarrow import fs

    server, endpoint = moto_server()
    try:
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench")
        options = {"endpoint_url": endpoint, "region": "us-east-1"}
        table = castable.create_table("s3://bench/events", SCHEMA, primary_key="id", storage_options=options)
        data = generate(rows)
        small = pa.Table.from_batches(list(event_batches(SMALL_ROWS, seed=1)), schema=SCHEMA)
        scattered, key_range = delete_cases(rows, 1)[0]
        new_rows, case = next(upsert_rows(rows, 1)), replace_cases(rows, 1)[0]
        lo, hi = scan_range(rows)
        out = []
        for name, operation in [
            (f"append {rows:,} rows", lambda: table.append(data)),
            (SCATTERED, lambda: table.delete(scattered.sql())),
            (f"{RANGE} ({key_range.hi - key_range.lo + 1:,} keys)", lambda: table.delete(key_range.sql())),
            (FULL, lambda: table.scan().to_arrow()),
            (f"{FULL} again (footers and deletes cached)", lambda: table.scan().to_arrow()),
            (
                f"{FILTERED} (2 columns, 1% key range)",
                lambda: table.scan(["id", "category"], f"id BETWEEN {lo} AND {hi}").to_arrow(),
            ),
            (f"small append ({SMALL_ROWS} rows)", lambda: table.append(small)),
            (f"{UPSERT.split()[0]} {new_rows.num_rows:,} rows", lambda: table.upsert(new_rows)),
            (REPLACE, lambda: table.overwrite(case.rows, where=case.sql())),
            ("open latest version", lambda: castable.open_table("s3://bench/events", storage_options=options)),
        ]:
            table.store.stats.reset()
            seconds, opened = timed(operation)
            store = opened.store if isinstance(opened, castable.Table) else table.store
            out.append((name, seconds, store.stats.snapshot()))
            log(f"S3: {name} in {fmt_s(seconds)}")
        s3 = fs.S3FileSystem(
            access_key=os.environ["AWS_ACCESS_KEY_ID"],
            secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
            endpoint_override=endpoint,
            region="us-east-1",
        )
        paths = [f"bench/events/{f.path}" for f in table.manifest.data_files if f.inline is None]
        readers = [
            *castable_readers(table, lo, hi),
            pyarrow_reader("pyarrow S3FileSystem, castable's files (deletes not applied)", FLOOR, paths, lo, hi, s3),
        ]
        for op in (S3_FULL, S3_FILTERED):
            take_turns(op, rows, readers, repeats, results)
        return out
    finally:
        server.close()  # type: ignore[attr-defined]
