"""The PNGs of a run: delete and write times, scan and append throughput, commit latency against history."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

from bench.compare.results import (
    APPEND,
    COMMIT,
    FILTERED,
    FULL,
    RANGE,
    REPLACE,
    SCATTERED,
    SMALL_ROWS,
    UPSERT,
    UPSERTED_SCAN,
    Result,
    Results,
)

matplotlib.use("Agg")
import matplotlib.pyplot as plt

COLORS = {"castable": "#1b9e77", "deltalake": "#d95f02", "pyiceberg": "#7570b3", "pyarrow": "#666666"}


def color_of(r: Result) -> str:
    return COLORS.get(r.family, "#999999")


def bar_panel(ax: Any, results: Results, op: str, scales: list[int], value: Callable[[Result, float], float]) -> None:
    """Grouped bars, one group per scale, one bar per system; whiskers span the min-max of the samples."""
    names = list(dict.fromkeys(r.system for s in scales for r in results.group(op, s)))
    width = 0.8 / max(1, len(names))
    for i, name in enumerate(names):
        xs, ys, lows, highs, colour = [], [], [], [], "#999999"
        for j, scale in enumerate(scales):
            r = results.find(op, scale, name)
            if r is None:
                continue
            y = value(r, r.median)
            a, b = value(r, min(r.times)), value(r, max(r.times))
            xs.append(j + (i - (len(names) - 1) / 2) * width)
            ys.append(y)
            lows.append(y - min(a, b))
            highs.append(max(a, b) - y)
            colour = color_of(r)
        dotted = any(word in name for word in ("native", "plain", "alone", "compact()"))
        hatch = "//" if "duckdb" in name else (".." if dotted else None)
        ax.bar(xs, ys, width, yerr=[lows, highs], label=name, color=colour, hatch=hatch, edgecolor="white", capsize=2)
    ax.set_xticks(range(len(scales)), [f"{s:,} rows" for s in scales])
    ax.set_title(op)
    ax.grid(axis="y", alpha=0.3)


def plots(results: Results, sizes: list[int], commits: list[int], out: Path) -> list[Path]:
    """The PNGs of the sections that ran: delete and write times (log scale), scan and append
    throughput, commit latency against history."""
    ran = {r.op for r in results.items.values() if r.times}
    paths = []
    if APPEND in ran:
        paths += delete_plots(results, sizes, out)
    if ran & {UPSERT, REPLACE, UPSERTED_SCAN}:
        paths.append(write_plot(results, sizes, out))
    if COMMIT in ran:
        paths.append(commit_plot(results, commits, out))
    return paths


def delete_plots(results: Results, sizes: list[int], out: Path) -> list[Path]:
    paths = []
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, op in zip(axes, (SCATTERED, RANGE), strict=True):
        bar_panel(ax, results, op, sizes, lambda r, t: t)
        ax.set_yscale("log")
        ax.set_ylabel("seconds (log scale), median with min-max")
    axes[0].legend(fontsize=8)
    fig.suptitle("Delete on a fresh table: wall time (lower is better)")
    paths.append(save(fig, out / "compare_delete.png"))

    fig, axes = plt.subplots(1, 2, figsize=(15, 6))
    for ax, op in zip(axes, (FULL, FILTERED), strict=True):
        bar_panel(ax, results, op, sizes, lambda r, t: (r.rows_out or 0) / t / 1e6)
        ax.set_ylabel("million rows returned per second")
    axes[0].legend(fontsize=7, loc="upper left")
    fig.suptitle("Scans after the deletes: throughput (higher is better); hatched = other engines on the same files")
    paths.append(save(fig, out / "compare_scan.png"))

    fig, ax = plt.subplots(figsize=(8, 5))
    bar_panel(ax, results, APPEND, sizes, lambda r, t: r.scale / t / 1e6)
    ax.set_ylabel("million rows appended per second")
    ax.legend(fontsize=8)
    fig.suptitle("Append of the whole table, same codec and layout for all (higher is better)")
    paths.append(save(fig, out / "compare_append.png"))
    return paths


def write_plot(results: Results, sizes: list[int], out: Path) -> Path:
    """Upsert and replace-where times by size (log scale), and scan throughput after upserts."""
    fig, axes = plt.subplots(1, 3, figsize=(19, 6), width_ratios=[2, 2, 1.3])
    for ax, op in zip(axes[:2], (UPSERT, REPLACE), strict=True):
        bar_panel(ax, results, op, sizes, lambda r, t: t)
        ax.set_yscale("log")
        ax.set_ylabel("seconds (log scale), median with min-max")
        ax.legend(fontsize=7, loc="upper left")
    scales = sorted({r.scale for r in results.items.values() if r.op == UPSERTED_SCAN})
    bar_panel(axes[2], results, UPSERTED_SCAN, scales, lambda r, t: (r.rows_out or 0) / t / 1e6)
    axes[2].set_ylabel("million rows returned per second")
    axes[2].legend(fontsize=7, loc="lower center", framealpha=0.9)
    fig.suptitle(
        "Upsert and replace-where: wall time (lower is better); full scan after upserts, before and after "
        "compact(): throughput (higher is better)"
    )
    return save(fig, out / "compare_writes.png")


def commit_plot(results: Results, commits: list[int], out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 5))
    for name in ("castable", "deltalake", "pyiceberg", "pyarrow"):
        rs = [r for c in sorted(commits) if (r := results.find(COMMIT, c, name))]
        if not rs:
            continue
        ys = [r.median * 1000 for r in rs]
        err = [
            [y - min(r.times) * 1000 for y, r in zip(ys, rs, strict=True)],
            [max(r.times) * 1000 - y for y, r in zip(ys, rs, strict=True)],
        ]
        ax.errorbar([r.scale for r in rs], ys, yerr=err, marker="o", capsize=3, label=name, color=COLORS[name])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("earlier commits")
    ax.set_ylabel(f"ms per {SMALL_ROWS}-row append commit (log), median with min-max")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    fig.suptitle("Commit latency against table history (lower is better)")
    return save(fig, out / "compare_commit.png")


def save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
