"""Published Iceberg metadata as the strictest readers take it (issue 50): a name mapping that
names each name once, whatever the rename history; each file ``ADDED`` in one snapshot only, so
incremental readers are exact; only the type promotions Iceberg v2 has; every type castable
stores published exactly or refused with ``IcebergPublishError``, never blocking later versions;
position deletes sorted by path; metrics on delete files, so every ``inspect`` table of
pyiceberg reads.

The tests here need a server, a JVM, a side venv or minutes; the rest are the unit tier's
(tests/unit/iceberg/test_iceberg_strict.py)."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from helpers import HELPERS
from helpers.iceberg_histories import READERS
from helpers.tables import FILES_ONLY
from unit.iceberg.test_iceberg_strict import TIMESTAMPS, timestamp_rows

import castable
from castable.format.inline import parquet_bytes
from castable.format.layout import ICEBERG_PREFIX
from castable.iceberg import publish
from castable.read.where import parse_predicate


def test_seconds_and_milliseconds_timestamps_are_written_in_microseconds_and_read_back_exactly(tmp_path: Path) -> None:
    """Data files and inline rows hold Parquet ``TIMESTAMP(MICROS)``, Iceberg's unit; castable
    reads the columns' own units back, filters by statistics and bloom filters as before, and
    iceberg-rust (which refuses milliseconds) reads the published table as castable does."""
    props = {"write.parquet.bloom-filter-columns": "ms", "write.row-group-size-bytes": 200_000}
    files = castable.create_table(str(tmp_path / "files"), TIMESTAMPS, primary_key="id", properties=FILES_ONLY | props)
    inline = castable.create_table(str(tmp_path / "inline"), TIMESTAMPS, primary_key="id")
    rows = timestamp_rows(list(random.Random(5).sample(range(100_000), 20_000)))
    files.append(rows)
    inline.append(rows.slice(0, 3))
    for table in (files, inline):
        publish(table)
        snapshot = table.snapshot()
        for f in snapshot.manifest.data_files:
            data = snapshot.store.get(f.path).data if f.inline is None else parquet_bytes(f.inline)
            parquet = pq.ParquetFile(pa.BufferReader(data)).schema
            for i in range(1, 4):
                assert "timeUnit=microseconds" in str(parquet.column(i).logical_type), (table.uri, i)
    got = files.scan().to_arrow()
    assert got.schema == pa.schema([f.remove_metadata() for f in TIMESTAMPS]) and got.sort_by("id") == rows.sort_by(
        "id"
    )
    point = rows.column("ms")[17].as_py()
    literal = point.isoformat(sep=" ", timespec="milliseconds")
    where = f"ms = TIMESTAMP '{literal}'"
    assert files.scan(filter=where).count() == 1
    snapshot = files.snapshot()
    (f,) = snapshot.manifest.data_files
    footer = snapshot.footer(f)
    predicate = parse_predicate(where, snapshot.schema)
    assert footer.num_row_groups >= 4 and len(snapshot.row_groups_matching(f, footer, predicate)) <= 2
    locations = [f"{t.uri}/{ICEBERG_PREFIX}v{t.version}.metadata.json" for t in (files, inline)]
    out = tmp_path / "rust"
    out.mkdir()
    helper = HELPERS / "rust_iceberg.py"
    subprocess.run([str(READERS), str(helper), str(out), *locations], check=True, timeout=600)
    for i, table in enumerate((files, inline)):
        with pa.OSFile(str(out / f"{i}.arrow")) as source:
            read = pa.ipc.open_file(source).read_all()
        want = table.scan().to_arrow().sort_by("id")
        assert read.select(want.column_names).cast(want.schema).sort_by("id") == want, table.uri
