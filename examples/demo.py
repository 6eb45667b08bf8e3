"""The castable demo: a table in a local directory, no AWS account needed.

Creates ./demo-table, appends from four processes at once, deletes by key range and by
predicate, scans, travels back in time and prints the history.
"""

from __future__ import annotations

import multiprocessing
import shutil
import sys
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
from rich.console import Console
from rich.table import Table as RichTable

import castable

URI = str(Path(__file__).resolve().parent.parent / "demo-table")
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("event_time", pa.timestamp("us", tz="UTC")),
        pa.field("category", pa.string()),
        pa.field("amount", pa.float64()),
    ]
)
console = Console()


def batch(worker: int, rows: int) -> pa.Table:
    rng = np.random.default_rng(worker)
    ids = np.arange(worker * rows, (worker + 1) * rows, dtype=np.int64)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    return pa.table(
        {
            "id": ids,
            "event_time": pa.array([start + timedelta(seconds=int(i)) for i in ids], SCHEMA.field("event_time").type),
            "category": rng.choice(["click", "view", "buy", "refund"], rows),
            "amount": rng.gamma(2.0, 20.0, rows).round(2),
        },
        schema=SCHEMA,
    )


def append_from_worker(worker: int) -> int:
    """One writer process: open the table and append its own rows; returns its version."""
    return castable.open_table(URI).append(batch(worker, 250_000), commit_id=f"demo-load-{worker}").version


def show(title: str, table: pa.Table) -> None:
    view = RichTable(*table.column_names, title=title)
    for row in table.to_pylist():
        view.add_row(*(str(v) for v in row.values()))
    console.print(view)


def main() -> None:
    shutil.rmtree(URI, ignore_errors=True)
    table = castable.create_table(
        URI, SCHEMA, primary_key="id", properties={"write.row-group-size-bytes": 4 * 1024 * 1024}
    )
    console.rule(f"[bold]castable demo[/bold]: table at {URI}")

    with ProcessPoolExecutor(4, mp_context=multiprocessing.get_context("spawn")) as pool:
        versions = sorted(pool.map(append_from_worker, range(4)))
    table.refresh()
    console.print(f"4 processes appended concurrently as versions {versions}; rows: {table.scan().count():,}")

    before_deletes = table.version
    table.store.stats.reset()
    deleted = table.delete("id BETWEEN 100000 AND 199999")
    cost = table.store.stats.snapshot()
    console.print(
        f"key-range delete -> version {deleted.version}: {cost.get('PUT')} PUTs, "
        f"{cost.get('GET', 0)} GETs, {cost['bytes_out']:,} bytes written, no data read"
    )
    console.print(f"  {deleted}")
    counted = table.count(version=deleted.version - 1) - table.count(version=deleted.version)
    console.print(f"  counted afterwards (what count=True does): {counted:,} rows deleted")
    refunds = table.delete("category = 'refund' AND amount > 100")
    console.print(f"predicate delete: {refunds}")

    console.print(
        f"rows now: {table.scan().count():,}; rows at version {before_deletes}: "
        f"{table.scan(version=before_deletes).count():,}"
    )
    big = table.scan(["id", "event_time", "amount"], "category = 'buy' AND amount > 150 AND id < 50000")
    show("first big buys (filter pushed down to row groups)", big.to_arrow().sort_by("id").slice(0, 5))

    second = next(h for h in table.history() if h.version == 2)
    console.print(
        f"time travel: as of {second.timestamp.isoformat()} the table had "
        f"{table.scan(as_of=second.timestamp).count():,} rows"
    )

    history = RichTable("version", "operation", "commit_id", "what it did", title="history")
    for h in table.history():
        history.add_row(str(h.version), h.operation, h.commit_id, h.described())
    console.print(history)
    cli = Path(sys.executable).parent / "castable"
    if cli.is_relative_to(Path.cwd()):
        cli = cli.relative_to(Path.cwd())
    console.print(f'try: [bold]{cli} info demo-table[/bold] or [bold]{cli} scan demo-table --filter "id < 5"[/bold]')


if __name__ == "__main__":
    main()
