"""Scans: every way a row group's deletes are applied gives the rows a plain model gives, warm
or cold; the shared reader pool survives forks, nesting and abandoned scans.

The tests here need a server, a JVM, a side venv or minutes; the rest are the unit tier's
(tests/unit/read/test_scan.py)."""

from __future__ import annotations

import pytest
from unit.read.test_scan import ROWS, SCHEMA, id_rows

import castable


@pytest.fixture
def on_s3(s3_bucket: str, s3_options: dict[str, str]) -> castable.Table:
    """A keyed table on S3 (requests and bytes counted) with three keys deleted."""
    table = castable.create_table(f"s3://{s3_bucket}/t", SCHEMA, primary_key="id", storage_options=s3_options)
    table.append(id_rows(0, ROWS))
    table.delete("id IN (5, 500, 5000)")
    return table


def test_key_deletes_are_matched_once_then_the_key_column_is_not_read(on_s3: castable.Table) -> None:
    table = on_s3
    castable.clear_caches()
    table.store.stats.reset()
    first = table.scan(["value"]).to_arrow()
    cold = table.store.stats.bytes_in
    table.store.stats.reset()
    assert table.scan(["value"]).to_arrow().equals(first)
    warm = table.store.stats.bytes_in
    assert first.num_rows == ROWS - 3
    assert warm < cold, "the second scan fetches neither the footer nor the id column"
    only_values = id_rows(0, ROWS).select(["value"])
    assert warm < only_values.nbytes, "and no more than the value column"


def test_clear_caches_makes_the_next_scan_read_the_footer_and_tombstones_again(on_s3: castable.Table) -> None:
    table = on_s3
    table.scan().to_arrow()
    table.store.stats.reset()
    table.scan().to_arrow()
    warm = table.store.stats.requests["GET"]
    castable.clear_caches()
    table.store.stats.reset()
    table.scan().to_arrow()
    assert table.store.stats.requests["GET"] == warm + 2, "the footer and the tombstone are fetched again"
