"""The data-file writer: files of the target size, published in the background, in order."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.tables import EVENTS, events

from castable.format.properties import TableProperties
from castable.inputs.sources import file_batches
from castable.parquet.writer import write_data_files
from castable.store import LocalStore, StagedObject, StoreError

PROPS = TableProperties.parse({"write.target-file-size-bytes": "6000", "write.row-group-size-bytes": "3000"})


class FlakyStore(LocalStore):
    """A local store whose n-th published object fails to publish."""

    def __init__(self, root: Path, fail_at: int) -> None:
        super().__init__(root)
        self.fail_at = fail_at
        self.published = 0

    @contextmanager
    def staged_write(self, key: str) -> Iterator[StagedObject]:
        with super().staged_write(key) as staged:
            yield staged
            self.published += 1
            if self.published == self.fail_at:
                raise StoreError(f"{key}: injected upload failure")


def leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.name.endswith(".parquet")]


def test_files_are_published_in_order_with_their_entries(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    files = write_data_files(store, events(0, 6000).to_batches(max_chunksize=100), EVENTS, PROPS)
    assert len(files) >= 4 and sum(f.rows for f in files) == 6000
    firsts = [f.stats["id"]["min"] for f in files]
    assert firsts == sorted(firsts), "entries come back in the order the rows were written"
    for f in files:
        assert store.head(f.path).size == f.size
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("fail_at", [1, 2, 4])
def test_a_failed_publish_surfaces_and_leaves_no_staged_file(tmp_path: Path, fail_at: int) -> None:
    store = FlakyStore(tmp_path, fail_at)
    with pytest.raises(StoreError, match="injected"):
        write_data_files(store, events(0, 6000).to_batches(max_chunksize=100), EVENTS, PROPS)
    assert leftovers(tmp_path) == []


def test_a_failing_input_waits_for_the_file_being_published_then_deletes_every_file(tmp_path: Path) -> None:
    def batches() -> Iterator[pa.RecordBatch]:
        yield from events(0, 2000).to_batches(max_chunksize=100)
        raise ValueError("the source broke")

    store = LocalStore(tmp_path)
    deleted: list[str] = []
    real = store.delete_many

    def spy(keys: list[str]) -> None:
        deleted.extend(keys)
        real(keys)

    store.delete_many = spy  # type: ignore[method-assign]
    with pytest.raises(ValueError, match="source broke"):
        write_data_files(store, batches(), EVENTS, PROPS)
    assert leftovers(tmp_path) == []
    assert deleted, "files were finished before the failure"
    assert list(tmp_path.rglob("*.parquet")) == [], "and deleted again: nothing refers to them"


def test_a_parquet_file_streams_one_row_group_at_a_time(tmp_path: Path) -> None:
    """The ingest path (``file_batches`` into the writer) holds about one row group of the source
    file, not every row group read so far: pyarrow's whole-file ``iter_batches`` keeps them all."""
    groups, rows_per_group = 16, 1024  # 1 KiB a row: 1 MiB row groups, 16 MiB in all
    rows = groups * rows_per_group
    payload = pa.array([bytes([i % 251]) * 1024 for i in range(rows)], pa.binary())
    path = tmp_path / "landed.parquet"
    table = pa.table({"id": pa.array(range(rows), pa.int64()), "payload": payload})
    pq.write_table(table, path, row_group_size=rows_per_group, compression="none")
    del payload, table
    file = pq.ParquetFile(pa.OSFile(str(path)))  # a native file: its reads come from Arrow's pool
    before, held, ids = pa.total_allocated_bytes(), 0, []
    for batch in file_batches(file):
        held = max(held, pa.total_allocated_bytes() - before)
        ids.extend(batch.column("id").to_pylist())
    assert ids == list(range(rows))
    assert held < 4 * 2**20, f"{held / 2**20:.1f} MiB of Arrow memory held while streaming 1 MiB row groups"
