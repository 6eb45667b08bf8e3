"""compare.md: the headline table, a verdict per target, castable's S3 requests, the method and the run."""

from __future__ import annotations

import argparse
import statistics
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import matplotlib
import numpy as np
import pyiceberg
from deltalake import __version__ as deltalake_version

from bench.common.benchlib import fmt_s, machine_line
from bench.compare.results import (
    APPEND,
    COMMIT,
    COMPACT,
    FILTERED,
    FULL,
    NEW_ROWS,
    RANGE,
    REFERENCE,
    REPLACE,
    S3_FILTERED,
    S3_FULL,
    SCATTERED,
    SMALL_ROWS,
    SUBJECT,
    UPSERT,
    UPSERTED_SCAN,
    UPSERTS,
    Result,
    Results,
)
from bench.compare.workloads import Layout, key_count, replace_cases, upsert_count
from castable.format.properties import DEFAULTS, ROW_GROUP_SIZE


def ratio(this: Result, other: Result | None) -> str:
    """How many times faster ``this`` is than ``other`` (other's median time over this one's)."""
    return "" if other is None else f"{other.median / this.median:.2f}x"


def scale_label(op: str, scale: int) -> str:
    return f"after {scale:,} commits" if op == COMMIT else f"{scale:,} rows"


def fmt_bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def headline(results: Results) -> list[str]:
    lines = [
        "| operation | scale | system | median | min-max | vs pyarrow floor | vs best peer | bytes written "
        "| data files rewritten |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    ops = [
        *(APPEND, SCATTERED, RANGE, FULL, FILTERED, S3_FULL, S3_FILTERED),
        *(UPSERT, REPLACE, UPSERTS, COMPACT, UPSERTED_SCAN, COMMIT),
    ]
    systems = list(dict.fromkeys(r.system for r in results.items.values()))
    for r in sorted(
        results.items.values(), key=lambda r: (ops.index(r.op), r.scale, r.role != SUBJECT, systems.index(r.system))
    ):
        if not r.times:
            continue
        written = fmt_bytes(statistics.median(r.written)) if r.written else ""
        rewritten = f"{statistics.median(r.rewritten):.0f}" if r.rewritten else ""
        name = f"**{r.system}**" if r.role == SUBJECT else r.system
        lines.append(
            f"| {r.op} | {scale_label(r.op, r.scale)} | {name} | {fmt_s(r.median)} "
            f"| {fmt_s(min(r.times))}-{fmt_s(max(r.times))} | {ratio(r, results.floor(r.op, r.scale))} "
            f"| {ratio(r, results.best_peer(r))} | {written} | {rewritten} |"
        )
    return lines


class Verdicts:
    """One line per target: met or missed, with the measured figures and the shortfall."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def check(self, target: str, measured: float | None, need: float, detail: str, at_most: bool = False) -> None:
        if measured is None:
            self.lines.append(f"- **not measured**: {target} ({detail})")
            return
        met = measured <= need if at_most else measured >= need
        if met:
            verdict = "**met**"
        else:
            short = measured / need if at_most else need / measured
            verdict = f"**missed** by {short:.2f}x"
        sign = "<=" if at_most else ">="
        self.lines.append(f"- {verdict}: {target}: {measured:,.2f} (target {sign} {need:,.2f}); {detail}")

    def note(self, what: str, measured: float | None, detail: str) -> None:
        """A figure shown next to a target without one of its own (another scale, say)."""
        if measured is not None:
            self.lines.append(f"- no target: {what}: {measured:,.2f}; {detail}")


def speedup(results: Results, op: str, scale: int, system: str, other: str) -> float | None:
    """``other``'s median time over ``system``'s, or None when either was not measured."""
    a, b = results.find(op, scale, system), results.find(op, scale, other)
    return None if a is None or b is None else b.median / a.median


def verdicts(results: Results, sizes: list[int], commits: list[int], upserts: int) -> list[str]:
    v = Verdicts()
    small, large = min(sizes), max(sizes)
    c_small, c_large = results.find(RANGE, small, "castable"), results.find(RANGE, large, "castable")
    if c_small and c_large and small != large:
        growth = c_large.median / c_small.median
        v.check(
            f"key-range delete flat from {small:,} to {large:,} rows (growth, at most 1.5x)",
            growth,
            1.5,
            f"{fmt_s(c_small.median)} -> {fmt_s(c_large.median)}",
            at_most=True,
        )
    for peer, need in (("deltalake", 100.0), ("pyiceberg", 100.0)):
        s = speedup(results, RANGE, large, "castable", peer)
        v.check(f"key-range delete at {large:,} rows vs {peer} (times faster)", s, need, "median over median")
    for peer, need in (("deltalake", 20.0), ("pyiceberg", 10.0)):
        s = speedup(results, SCATTERED, large, "castable", peer)
        v.check(f"1,000 scattered-key delete at {large:,} rows vs {peer} (times faster)", s, need, "median over median")
    ours = results.find(SCATTERED, large, "castable")
    for peer in ("deltalake", "pyiceberg"):
        theirs = results.find(SCATTERED, large, peer)
        if ours and theirs:
            fewer = statistics.median(theirs.written) / max(1, statistics.median(ours.written))
            detail = f"{fmt_bytes(statistics.median(ours.written))} vs {fmt_bytes(statistics.median(theirs.written))}"
            v.check(f"scattered delete at {large:,} rows: times fewer bytes written than {peer}", fewer, 10_000, detail)
    for op in (FULL, FILTERED, APPEND):
        for rows in sizes:
            ours = results.find(op, rows, "castable")
            floor = results.floor(op, rows)
            if ours is None or floor is None:
                continue
            extra = ""
            plain = results.find(op, rows, "pyarrow, plain copy of the live rows")
            if plain:
                extra = f"; vs pyarrow on a plain copy of the live rows {plain.median / ours.median:.2f}x"
            v.check(
                f"{op} at {rows:,} rows vs pyarrow floor ({floor.system})",
                floor.median / ours.median,
                0.9,
                f"{fmt_s(ours.median)} vs {fmt_s(floor.median)}{extra}",
            )
            if op != APPEND:
                best = results.best_peer(ours)
                if best:
                    v.check(
                        f"{op} at {rows:,} rows vs fastest peer reader ({best.system})",
                        best.median / ours.median,
                        1.0,
                        f"{fmt_s(ours.median)} vs {fmt_s(best.median)}",
                    )
    write_verdicts(v, results, sizes)
    for op in (S3_FULL, S3_FILTERED):
        for r in (r for r in results.items.values() if r.op == op and r.role == SUBJECT):
            floor = results.floor(op, r.scale)
            if floor is not None and r.times and floor.times:
                v.note(
                    f"{op} at {r.scale:,} rows vs pyarrow's S3 read of the same files",
                    floor.median / r.median,
                    f"{fmt_s(r.median)} vs {fmt_s(floor.median)} (requests and bytes per scan: the S3 table)",
                )
    for scale in sorted({r.scale for r in results.items.values() if r.op == UPSERTED_SCAN}):
        before, after = results.fastest(UPSERTED_SCAN, scale, SUBJECT), results.fastest(UPSERTED_SCAN, scale, REFERENCE)
        v.check(
            f"full scan of {scale:,} rows after {upserts} upserts vs after compact() (speed ratio, at least 0.8x)",
            None if before is None or after is None else after.median / before.median,
            0.8,
            "" if before is None or after is None else f"{fmt_s(before.median)} vs {fmt_s(after.median)} compacted",
        )
    first, last = results.find(COMMIT, min(commits), "castable"), results.find(COMMIT, max(commits), "castable")
    if first and last:
        v.check(
            f"commit latency after {max(commits):,} commits over that after {min(commits):,} (at most 2x)",
            last.median / first.median,
            2.0,
            f"{fmt_s(first.median)} -> {fmt_s(last.median)}",
            at_most=True,
        )
        delta = results.find(COMMIT, max(commits), "deltalake")
        if delta:
            v.check(
                f"commit latency after {max(commits):,} commits vs deltalake (times faster)",
                delta.median / last.median,
                1.0,
                f"{fmt_s(last.median)} vs {fmt_s(delta.median)}",
            )
    return v.lines


def write_verdicts(v: Verdicts, results: Results, sizes: list[int]) -> None:
    """Upsert and replace-where: speed against the peers at the largest size (the others shown as
    notes), and castable's upsert bytes against those of its new rows alone as one Parquet file."""
    large = max(sizes)
    for op, need, targeted in ((UPSERT, 50.0, ("deltalake", "pyiceberg")), (REPLACE, 10.0, ("deltalake",))):
        for rows in sizes:
            ours = results.find(op, rows, "castable")
            for peer in ("deltalake", "pyiceberg"):
                theirs = results.find(op, rows, peer)
                if ours is None or theirs is None:
                    continue
                what = f"{op} at {rows:,} rows vs {peer} (times faster)"
                detail = f"{fmt_s(ours.median)} vs {fmt_s(theirs.median)}"
                if rows == large and peer in targeted:
                    v.check(what, theirs.median / ours.median, need, detail)
                else:
                    v.note(what, theirs.median / ours.median, detail)
    for rows in sizes:
        ours, alone = results.find(UPSERT, rows, "castable"), results.find(UPSERT, rows, NEW_ROWS)
        if ours and alone:
            a, b = statistics.median(ours.written), statistics.median(alone.written)
            v.check(
                f"{UPSERT} at {rows:,} rows: bytes written over the new rows alone as one Parquet file (at most 2x)",
                a / b,
                2.0,
                f"{fmt_bytes(a)} vs {fmt_bytes(b)}",
                at_most=True,
            )


def s3_table(rows: list[tuple[str, float, dict[str, int]]]) -> list[str]:
    lines = [
        "| operation | wall time | PUT | GET | HEAD | LIST | other requests | bytes up | bytes down |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, seconds, s in rows:
        counts = {k: v for k, v in s.items() if not k.startswith("bytes")}
        other = sum(v for k, v in counts.items() if k not in ("PUT", "GET", "HEAD", "LIST"))
        lines.append(
            f"| {name} | {fmt_s(seconds)} | {counts.get('PUT', 0)} | {counts.get('GET', 0)} | {counts.get('HEAD', 0)} "
            f"| {counts.get('LIST', 0)} | {other} | {fmt_bytes(s['bytes_out'])} | {fmt_bytes(s['bytes_in'])} |"
        )
    return lines


def versions() -> str:
    return (
        f"deltalake {deltalake_version}, pyiceberg {pyiceberg.__version__}, duckdb {duckdb.__version__}, "
        f"matplotlib {matplotlib.__version__}, numpy {np.__version__}."
    )


def document(
    args: argparse.Namespace,
    *,
    command: str,
    layout: Layout,
    results: Results,
    s3: list[tuple[str, float, dict[str, int]]],
    s3_rows: int,
    compaction_sizes: list[int],
    elapsed: float,
    pngs: list[Path],
    verdict_lines: list[str],
) -> list[str]:
    """The lines of compare.md, for a run of ``command`` (parsed into ``args``) that took ``elapsed`` seconds."""
    s3_lines = [
        f"## castable on S3 (moto server over HTTP, {s3_rows:,} rows)",
        "",
        "One run each, in this order on one table; bytes up and down count request bodies, Parquet reads included.",
        "",
        *s3_table(s3),
        "",
    ]
    return [
        "# castable vs Delta Lake vs Iceberg vs plain Parquet",
        "",
        f"Medians of {args.repeats} runs (min-max shown), measured side by side in one run of `{command}` "
        f"({elapsed / 60:.1f} min). Ratios are speed ratios: the other system's median time over this row's, "
        "so above 1x means this row is faster. *vs pyarrow floor* compares with the pyarrow row of the same "
        "operation; *vs best peer* with the fastest system or reader of another family (castable, deltalake "
        "and its readers, pyiceberg), the floor and reference readers excluded.",
        "",
        f"Every system writes {layout.codec} Parquet, files of at most {fmt_bytes(layout.file_bytes)} and row "
        f"groups of {layout.row_group_rows:,} rows (castable's defaults: its row groups are cut at "
        f"{fmt_bytes(int(DEFAULTS[ROW_GROUP_SIZE]))} of Arrow data).",
        "",
        "## Headline",
        "",
        *headline(results),
        "",
        "## Targets",
        "",
        *verdict_lines,
        "",
        *(s3_lines if s3 else []),
        "## Method",
        "",
        "- Table: the synthetic event table of bench/common/benchlib.py (id int64 sorted unique, event_time "
        "growing with id by 1 ms per row, ~100 random payload bytes, 8 categories; seed 42), generated once "
        "per size and held in memory, so appends time only the write. Tables are created empty before the "
        "timed append.",
        "- Deletes: every delete runs on a fresh table appended just before it (rebuilt, not copied: pyiceberg's "
        "metadata holds absolute paths), so each repeat is also one more append sample (hence twice as many "
        "append samples as repeats). Scattered keys differ per repeat (fixed seed) and are the same for every "
        f"system; each key range is {key_count(min(args.sizes)):,} contiguous keys. Handles are opened before "
        "the timer starts.",
        "- Every timed write starts after os.sync(), so no system pays for another's dirty pages. castable "
        "fsyncs each object it writes and pyiceberg's SQLite catalog syncs its commits; deltalake and plain "
        "pyarrow leave writeback to the page cache (seen with strace).",
        "- Bytes written: the sizes of files new or changed under the table's directory, walked before and after "
        "(the same for all systems; pyiceberg's SQLite catalog is outside and not counted). Data files rewritten: "
        "data files of the version before the operation that are no longer in the version after it (rewritten "
        "copy-on-write, or dropped); castable's tombstones remove none, and the files holding new rows are not "
        "counted.",
        "- The pyarrow floor: appends write one Parquet file with the same codec and row-group size; deletes, "
        "upserts and replace-wheres read that file, drop the replaced rows, add the new ones and write it again "
        "(copy-on-write without a table format); commits write a new "
        f"{SMALL_ROWS}-row file each. For scans the floor is pyarrow reading castable's own data files, which "
        "ignores castable's deletes; the plain copy (the floor's own file after its deletes) and DuckDB over it "
        "are shown as references.",
        "- Scans read the table left by the last scattered-key repeat after one more key-range delete. Each reader "
        "runs once to warm up (and row counts are checked equal), then the readers take turns for each repeat. "
        "DuckDB reads delta's current files with read_parquet (copy-on-write deletes leave no deletion vectors; "
        "the delta extension cannot be installed offline).",
        "- *castable, caches cleared before each scan*: `castable.clear_caches()` before each scan, so footers, "
        "tombstones and the positions of key deletes are fetched and worked out again, as in a new process "
        "(the table handle and its manifest are kept). The plain *castable* row keeps them, as a long-lived "
        "process or a warm Lambda does.",
        f"- Scans on S3: after the operations of the S3 table below (so the {s3_rows:,}-row table has its deletes, "
        "an upsert and a replace-where), castable's scans and pyarrow's dataset over `pyarrow.fs.S3FileSystem` "
        "reading the same data files (deletes not applied) take turns against the same moto server, warm-up "
        "first, as above. The S3 table gives castable's requests and bytes of a first (cold) and a second scan.",
        f"- Upserts and replace-wheres: one table per system and size, appended untimed; then {args.repeats} "
        "repeats, systems taking turns, each an upsert followed by a replace-where on the same table, so repeat "
        "n writes to a table that has had n - 1 of each (the same for every system). Each upsert has "
        f"{upsert_count(max(args.sizes)):,} rows: half new ids past the current maximum, half existing ids "
        "drawn at random over the table (fixed seed, other ones each repeat, the same for every system), all "
        "with new payloads and categories. castable: `table.upsert(rows)` (primary key id); deltalake: "
        '`merge(predicate="t.id = s.id").when_matched_update_all().when_not_matched_insert_all()` with the '
        'same writer properties as its deletes; pyiceberg: `upsert(rows, join_cols=["id"])`. *pyarrow, the new '
        "rows alone as one Parquet file* is pq.write_table of the upsert's rows with the same codec: the least "
        "an upsert can write. After the repeats every system's live row count is checked.",
        "- Replace-where: each repeat replaces another contiguous 1% of the rows (from 10%, 20%, ... of the "
        "id range), chosen by an event_time range (event_time grows with id), e.g. "
        f"`{replace_cases(max(args.sizes), 1)[0].sql()}` at {max(args.sizes):,} rows, by as many new rows with "
        "the same ids and times and new payloads (so each new row matches the predicate). castable: "
        '`table.overwrite(rows, where=sql)`; deltalake: `write_deltalake(mode="overwrite", predicate=sql)` '
        "with the same text; pyiceberg: `overwrite(rows, overwrite_filter=...)` with the same range as an "
        "expression. All repeats of every system are run.",
        f"- Compaction: castable only, at {', '.join(f'{n:,}' for n in compaction_sizes)} rows: a fresh table, "
        f"then {args.upserts} upserts like those above, one after the other (each timed: *{UPSERTS}*, the "
        "median and min-max of all of them), then compact() with the default options (timed once: "
        f"*{COMPACT}*). The full scan of the version before the compaction (a handle opened before it keeps "
        "reading it) and of the compacted one then take turns, with the floor (pyarrow over the uncompacted "
        "version's data files, deletes not applied); row counts are checked equal. deltalake's scan after as "
        "many merges is not shown: its merges already rewrite every file they touch (see the upsert rows), and "
        "100 of them at 10,000,000 rows would take longer than the rest of the run.",
        f"- Commit latency: each system appends {SMALL_ROWS}-row batches to a fresh table; at each checkpoint "
        f"the next {args.repeats} appends are timed, systems taking turns. deltalake and pyiceberg keep their "
        "table handle, like castable.",
        "",
        "## Run",
        "",
        f"Finished {datetime.now(UTC):%Y-%m-%d %H:%M} UTC. Sections: {', '.join(args.sections)}. "
        f"{machine_line(versions())}",
        "",
        f"Plots: {', '.join(p.name for p in pngs)}.",
    ]
