"""add_files proves a file decodes before committing it: a file with a corrupt page is refused
by name and nothing is committed; ``verify="footer"`` reads footers only (for a trusted writer's
files); a key column without null counts is checked by decoding it (issue: files the world
writes)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.damaged import DAMAGES, damaged
from helpers.tables import snapshot_of

import castable
from castable.errors import CorruptObjectError, InvalidInputError, SchemaMismatchError

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
ROWS = 10_000


def rows(with_null_key: bool = False) -> pa.Table:
    ids = pa.array([None if with_null_key and i == 77 else i for i in range(ROWS)], pa.int64())
    return pa.table({"id": ids, "v": [f"value-{i}" for i in range(ROWS)]}, schema=SCHEMA)


def corrupt(path: Path, kind: str = "snappy page") -> None:
    """Write a file whose ``v`` column has a page damaged as ``kind`` says (its footer is intact)."""
    path.write_bytes(damaged(rows(), kind))


@pytest.fixture
def table(tmp_path: Path) -> castable.Table:
    t = castable.create_table(str(tmp_path / "t"), SCHEMA, primary_key="id")
    (tmp_path / "t" / "data").mkdir()
    return t


@pytest.mark.parametrize("kind", DAMAGES)
def test_a_file_that_does_not_decode_is_refused_by_name(table: castable.Table, kind: str) -> None:
    root = Path(table.uri.removeprefix("file://"))
    pq.write_table(rows().slice(0, 10), root / "data" / "good.parquet")
    corrupt(root / "data" / "bad.parquet", kind)
    before = snapshot_of(table.store)
    with pytest.raises(
        InvalidInputError, match=rf"data/bad.parquet does not decode \(row group 0\): .*{DAMAGES[kind]}"
    ):
        table.add_files(["data/good.parquet", "data/bad.parquet"])
    assert snapshot_of(table.store) == before and table.refresh().version == 0


@pytest.mark.parametrize("mode", ["splice", "rewrite"])
def test_erase_never_re_encodes_a_page_that_fails_its_checksum(table: castable.Table, mode: str) -> None:
    """A bit flipped in a page with a CRC still decodes; an erase reading it refuses, rather than
    write the changed values under a new, valid checksum."""
    root = Path(table.uri.removeprefix("file://"))
    corrupt(root / "data" / "flipped.parquet", "page checksum")
    table.add_files(["data/flipped.parquet"], verify="footer")
    before = snapshot_of(table.store)
    with pytest.raises(CorruptObjectError, match=r"flipped.parquet does not decode .*CRC checksum verification failed"):
        table.erase("id = 5", mode=mode)
    assert snapshot_of(table.store) == before


def test_verify_footer_reads_footers_only(table: castable.Table) -> None:
    root = Path(table.uri.removeprefix("file://"))
    corrupt(root / "data" / "bad.parquet")
    table.add_files(["data/bad.parquet"], verify="footer")
    with pytest.raises(CorruptObjectError, match="does not decode"):
        table.to_arrow()
    with pytest.raises(InvalidInputError, match="verify must be one of decode, footer"):
        table.add_files(["data/bad.parquet"], verify="pages")  # type: ignore[arg-type]


@pytest.mark.parametrize("null_key", [False, True])
def test_a_key_without_null_counts_is_checked_by_decoding_it(table: castable.Table, null_key: bool) -> None:
    root = Path(table.uri.removeprefix("file://"))
    pq.write_table(rows(null_key), root / "data" / "nostats.parquet", write_statistics=False)
    if null_key:
        with pytest.raises(SchemaMismatchError, match="holds NULLs"):
            table.add_files(["data/nostats.parquet"])
        assert table.refresh().version == 0
    else:
        table.add_files(["data/nostats.parquet"])
        assert table.count() == ROWS
    with pytest.raises(SchemaMismatchError, match="does not say it holds none"):
        table.add_files(["data/nostats.parquet"], verify="footer", commit_id="footer-only")
