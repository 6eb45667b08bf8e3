"""Nothing outside a local store's folder is read, written or deleted through a symbolic link:
not by a table's own operations (add_files, scans, gc, purge), nor by the catalog over a
warehouse whose table folder is a link to a table elsewhere. The files outside are checked to
the byte before and after."""

from __future__ import annotations

import hashlib
import os
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.rest_catalog import Served
from helpers.tables import EVENTS, FILES_ONLY, events

import castable
from castable.errors import OutsideStoreError
from castable.store import LocalStore


def fingerprint(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (links not followed) and the hash of its bytes."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A castable table outside every store the tests open, and a plain Parquet file beside it."""
    folder = tmp_path / "outside"
    t = castable.create_table(str(folder / "table"), EVENTS, primary_key="id", properties=FILES_ONLY)
    t.append(events(0, 50))
    t.append(events(50, 100))
    pq.write_table(events(100, 110), folder / "secret.parquet")
    return folder


def test_a_data_file_that_links_out_is_refused(tmp_path: Path, outside: Path) -> None:
    before = fingerprint(outside)
    t = castable.create_table(str(tmp_path / "t"), EVENTS, primary_key="id")
    (tmp_path / "t" / "data").mkdir()
    os.symlink(outside / "secret.parquet", tmp_path / "t" / "data" / "x.parquet")
    with pytest.raises(OutsideStoreError, match=r"data/x.parquet resolves to .*secret.parquet, outside"):
        t.add_files(["data/x.parquet"])
    with pytest.raises(OutsideStoreError):
        t.store.get("data/x.parquet")
    assert [o.key for o in t.store.list("data/")] == [], "a link out is no object of the store"
    t.store.delete("data/x.parquet")  # removes the link, not what it names
    assert not (tmp_path / "t" / "data" / "x.parquet").is_symlink()
    assert fingerprint(outside) == before and t.version == 0


def test_gc_and_purge_never_reach_through_a_linked_folder(tmp_path: Path, outside: Path) -> None:
    before = fingerprint(outside)
    t = castable.create_table(str(tmp_path / "t"), EVENTS, primary_key="id", properties=FILES_ONLY)
    t.append(events(0, 10))
    os.symlink(outside / "table" / "data", tmp_path / "t" / "data" / "elsewhere")
    report = t.gc(orphan_grace=timedelta(0))
    assert not any("elsewhere" in key for key in report.objects)
    with pytest.raises(OutsideStoreError):
        t.store.put("data/elsewhere/new.parquet", b"x")
    erased = t.erase("id = 3", purge=True)
    assert erased.purge is not None and erased.purge.verified
    assert fingerprint(outside) == before and castable.open_table(str(outside / "table")).scan().count() == 100


def test_a_table_reached_through_a_link_to_its_folder_works_within_its_real_folder(
    tmp_path: Path, outside: Path
) -> None:
    """The fence is the store's real folder: a table opened by a link to it is whole."""
    os.symlink(outside / "table", tmp_path / "alias")
    t = castable.open_table(str(tmp_path / "alias"))
    assert t.scan().count() == 100
    t.append(events(100, 101))
    assert castable.open_table(str(outside / "table")).scan().count() == 101


def test_a_warehouse_folder_that_links_to_a_table_elsewhere_is_no_table_of_the_catalog(
    tmp_path: Path, outside: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    (warehouse / "db").mkdir(parents=True)
    castable.create_table(str(warehouse / "db" / "own"), EVENTS).append(events(0, 5))
    os.symlink(outside / "table", warehouse / "db" / "linked")
    before = fingerprint(outside)
    store = LocalStore(warehouse)
    assert store.child("db").folders() == ["own"]
    with pytest.raises(OutsideStoreError):
        store.child("db").child("linked")
    served = Served(str(warehouse))
    try:
        status, body = served.raw("GET", "/v1/namespaces/db/tables")
        assert status == 200 and [t["name"] for t in body["identifiers"]] == ["own"]
        for method, path in (
            ("GET", "/v1/namespaces/db/tables/linked"),
            ("DELETE", "/v1/namespaces/db/tables/linked?purgeRequested=true"),
        ):
            status, body = served.raw(method, path)
            assert 400 <= status < 500, (method, status, body)
    finally:
        served.close()
    assert fingerprint(outside) == before, "nothing written there (not even a lock file) nor deleted"


def test_a_scan_refuses_a_data_file_replaced_by_a_link_out(tmp_path: Path, outside: Path) -> None:
    t = castable.create_table(str(tmp_path / "t"), EVENTS, primary_key="id", properties=FILES_ONLY)
    t.append(events(0, 10))
    (data,) = t.manifest.data_files
    path = tmp_path / "t" / data.path
    path.unlink()
    os.symlink(outside / "secret.parquet", path)
    with pytest.raises(OutsideStoreError):
        t.scan().to_arrow()
    assert pa.table(pq.read_table(outside / "secret.parquet")).num_rows == 10
