"""The report of changes.py: its tables, ratios and targets as Markdown. Not a benchmark itself."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
from typing import Any

from bench.common.benchlib import ROOT, report_header
from bench.format.scale_tables import ROWS_PER_FILE
from bench.reads.changes_measure import CASTABLE, RANGES, REAL_FILES, SYSTEMS, Peers

PREIMAGE, POSTIMAGE = "update_preimage", "update_postimage"
RANGE_TITLES = {
    "scattered": "the upsert of {keys:,} scattered keys (1 version)",
    "run": "the upsert of a run of {keys:,} keys (1 version)",
    "both": "both upserts (2 versions)",
}


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
