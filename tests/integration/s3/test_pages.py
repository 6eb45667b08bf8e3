"""Page-level reads (castable.read.pages): castable writes page indexes, and a filtered scan of a file
with them fetches only the pages that may match, with exactly the rows a whole read gives.

The tests here need a server, a JVM, a side venv or minutes; the rest are the unit tier's
(tests/unit/read/test_pages.py)."""

from __future__ import annotations

import pytest
from unit.read.test_pages import ROWS, SCHEMA, rows

import castable
from castable.read import pages
from castable.store import ranges


def test_on_s3_a_selective_scan_fetches_a_fraction_of_the_row_group(
    s3_bucket: str, s3_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The S3 reader fetches ranges closer than 1 MiB together (a GET costs more than reading
    that much): with gaps scaled down as this 5 MB file is to a 256 MB one, the pages of a key
    range and the page indexes are all that come."""
    monkeypatch.setattr(ranges, "_COALESCE_GAP", 16 * 1024)
    uri = f"s3://{s3_bucket}/pages"
    t = castable.create_table(uri, SCHEMA, primary_key="id", storage_options=s3_options)
    t.append(rows(0, ROWS))
    where = "id BETWEEN 100000 AND 100499"
    fetched = {}
    default = pages.PAGE_READ_MAX_FRACTION
    for fraction in (0.0, default):  # never page by page, then by default
        monkeypatch.setattr(pages, "PAGE_READ_MAX_FRACTION", fraction)
        castable.clear_caches()
        fresh = castable.open_table(uri, storage_options=s3_options)
        fresh.store.stats.reset()
        assert fresh.scan(filter=where).to_arrow().sort_by("id").equals(rows(0, ROWS).slice(100_000, 500))
        fetched[fraction] = fresh.store.stats.bytes_in
    assert fetched[default] < fetched[0.0] / 2, fetched
