"""castable versions published as Iceberg metadata (castable.iceberg): pyiceberg and DuckDB's own
iceberg extension read exactly castable's rows, at the newest version and at every retained
older one, over random histories; a publication that crashes at any write leaves metadata that
readers read correctly or do not see, and the next repairs it; what Iceberg v2 cannot say is
refused with nothing published; a publication writes O(change)."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.nested import SCHEMA as NESTED
from helpers.nested import nested_history, null_lists_empty
from helpers.nested import rows as nested_rows
from helpers.tables import FILES_ONLY
from pyiceberg.table import StaticTable
from pyiceberg.types import StructType

import castable
from castable.format.layout import ICEBERG_PREFIX
from castable.format.properties import AFTER_COMMIT
from castable.iceberg import IcebergPublishError, publish
from castable.store import ObjectInfo, StoreError
from castable.store.local import LocalStore
from castable.store.s3 import S3Store

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("category", pa.string()), ("value", pa.float64())])


def random_rows(ids: list[int], rng: random.Random, size: int = 1) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "category": [None if rng.random() < 0.1 else rng.choice("abc") * size for _ in ids],
            "value": [rng.choice([None, rng.uniform(0, 100)]) for _ in ids],
        },
        schema=SCHEMA,
    )


def read_by_pyiceberg(table: castable.Table, version: int) -> pa.Table:
    """What pyiceberg reads of ``version`` through the latest published metadata."""
    location = f"{table.uri}/{ICEBERG_PREFIX}v{table.version}.metadata.json"
    static = StaticTable.from_metadata(location, properties=fileio_properties(table))
    return static.scan(snapshot_id=version).to_arrow()


def fileio_properties(table: castable.Table) -> dict[str, str]:
    store = table.store
    if isinstance(store, S3Store):
        return {
            "s3.endpoint": str(store.client.meta.endpoint_url),
            "s3.access-key-id": "testing",
            "s3.secret-access-key": "testing",
            "s3.region": "us-east-1",
        }
    return {}


def assert_same_rows(got: pa.Table, want: pa.Table, what: str) -> None:
    """``got`` (another engine's) holds exactly ``want``'s rows, whatever the order and the
    engine's choice of string and timestamp layouts."""
    assert got.column_names == want.column_names, what
    got = got.cast(want.schema).sort_by("id")
    assert got.equals(want.sort_by("id")), f"{what}: {got.num_rows} rows against {want.num_rows}"


def test_erase_and_purge_remove_the_published_metadata_and_the_next_publication_rebuilds_it(
    table_uri: tuple[str, dict[str, str] | None],
) -> None:
    uri, options = table_uri
    table = castable.create_table(uri, SCHEMA, primary_key="id", storage_options=options)
    rng = random.Random(5)
    table.append(random_rows(list(range(50)), rng))
    table.append(random_rows(list(range(50, 5000)), rng, 40))
    publish(table)
    before = {o.key: o.etag for o in table.store.list(ICEBERG_PREFIX)}
    table.erase("id = 7", purge=True)
    assert not list(table.store.list(ICEBERG_PREFIX)), "every published object is gone: they named id 7's rows"
    publish(table)
    assert_same_rows(read_by_pyiceberg(table, table.version), table.scan().to_arrow(), "republished")
    assert 7 not in read_by_pyiceberg(table, table.version).column("id").to_pylist()

    # with publish.iceberg on, the purge publishes again at once: no commit need follow it
    table.set_properties({"publish.iceberg": "true"})
    from castable.iceberg import background

    background.flush()
    published = {o.key: o.etag for o in table.store.list(ICEBERG_PREFIX)}
    table.erase("id = 8", purge=True)
    after = {o.key: o.etag for o in table.store.list(ICEBERG_PREFIX)}
    assert after and not set(after.items()) & set((before | published).items()), "nothing from before the purge"
    assert_same_rows(read_by_pyiceberg(table, table.version), table.scan().to_arrow(), "published after the purge")
    assert not {7, 8} & set(read_by_pyiceberg(table, table.version).column("id").to_pylist())


Put = Callable[..., ObjectInfo]


@pytest.mark.parametrize("inline", [True, False], ids=["inline", "files"])
def test_a_publication_that_crashes_at_any_write_is_read_right_or_not_seen_and_repaired(
    table_uri: tuple[str, dict[str, str] | None], monkeypatch: pytest.MonkeyPatch, inline: bool
) -> None:
    uri, options = table_uri
    rng = random.Random(9)
    props = {} if inline else FILES_ONLY
    table = castable.create_table(uri, SCHEMA, primary_key="id", properties=props, storage_options=options)
    table.append(random_rows(list(range(40)), rng))
    publish(table)
    table.append(random_rows(list(range(40, 90)), rng))
    table.delete("id IN (3, 45, 60)")
    first = table.version - 2
    kind = type(table.store)
    real: Put = kind.put

    def publish_first() -> None:
        """The story's start each time: only version ``first`` published."""
        for key in [o.key for o in table.store.list(ICEBERG_PREFIX)]:
            table.store.delete(key)
        publish(table, first)

    def crashing(at: int) -> list[str]:
        """Crash the ``at``-th write of a publication (0: none); the publication's writes."""
        seen: list[str] = []

        def put(store: Any, key: str, data: bytes, **options: Any) -> ObjectInfo:
            if key.startswith(ICEBERG_PREFIX):
                seen.append(key)
                if len(seen) == at:
                    raise StoreError(f"{key}: crashed (injected)")
            return real(store, key, data, **options)

        monkeypatch.setattr(kind, "put", put)
        return seen

    publish_first()
    writes = crashing(0)
    publish(table)
    monkeypatch.setattr(kind, "put", real)
    assert len(writes) >= 6, writes
    for at in range(1, len(writes) + 1):
        publish_first()
        crashing(at)
        with pytest.raises(StoreError, match="injected"):
            publish(table)
        monkeypatch.setattr(kind, "put", real)
        hint = int(table.store.get(f"{ICEBERG_PREFIX}version-hint.text").data)
        assert first <= hint < table.version, "the hint moves last: readers see a version published whole"
        location = f"{table.uri}/{ICEBERG_PREFIX}v{hint}.metadata.json"
        static = StaticTable.from_metadata(location, properties=fileio_properties(table))
        assert_same_rows(static.scan().to_arrow(), table.scan(version=hint).to_arrow(), f"after a crash at write {at}")
    publish(table)
    assert_same_rows(read_by_pyiceberg(table, table.version), table.scan().to_arrow(), "repaired")


def test_a_publication_writes_what_changed_not_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    table = castable.create_table(str(tmp_path / "t"), SCHEMA, primary_key="id", properties=FILES_ONLY)
    for i in range(60):
        table.append(random_rows(list(range(i * 10, i * 10 + 10)), rng))
    publish(table)
    real: Put = LocalStore.put
    written: list[str] = []

    def counting(store: LocalStore, key: str, data: bytes, **options: Any) -> ObjectInfo:
        if key.startswith(ICEBERG_PREFIX):
            written.append(key)
        return real(store, key, data, **options)

    monkeypatch.setattr(LocalStore, "put", counting)
    table.append(random_rows([10_000], rng))
    publish(table)
    assert len(written) == 4, written  # the new segment's manifest, the manifest list, the metadata, the hint
    written.clear()
    table.delete("id IN (5, 77)")
    publish(table)
    assert len(written) == 5, written  # and the tombstone's position deletes
    assert_same_rows(read_by_pyiceberg(table, table.version), table.scan().to_arrow(), "after O(change) publications")


def test_a_file_is_described_once_however_often_its_segment_merges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """castable merges small segments as a table grows; a merged segment gets its own manifest,
    but the files it lists keep the description the last publication gave them: only the new
    file's footer is read (a merge of 65,000 files used to read 65,000 footers)."""
    from castable.read.snapshot import Snapshot

    rng = random.Random(4)
    table = castable.create_table(str(tmp_path / "t"), SCHEMA, primary_key="id", properties=FILES_ONLY)
    real = Snapshot.footer
    read: list[str] = []

    def counting(snapshot: Snapshot, f: Any) -> Any:
        read.append(f.path)
        return real(snapshot, f)

    monkeypatch.setattr(Snapshot, "footer", counting)
    for i in range(40):
        table.append(random_rows(list(range(i * 10, i * 10 + 10)), rng))
        before = len(read)
        publish(table)
        assert len(read) - before == 1, f"append {i}: {len(read) - before} footers read"
    assert max(p.count for p in table.manifest.data_files.parts) > 8, "segments merged on the way"
    assert_same_rows(read_by_pyiceberg(table, table.version), table.scan().to_arrow(), "after merges")


def test_a_table_of_format_1_publishes_once_upgraded_under_the_ids_its_first_schema_change_gives(
    tmp_path: Path,
) -> None:
    """Format 1 has no column ids and no segments: its versions have no snapshot, but once
    upgraded the table publishes under ids 1, 2, ... (what castable's first schema change
    gives), its files found by name; a rename after keeps them."""
    rng = random.Random(8)
    table = castable.create_table(str(tmp_path / "t"), SCHEMA, primary_key="id", format_version=1)
    table.append(random_rows(list(range(10)), rng))
    table.delete("id = 3")
    table.upgrade()
    table.append(random_rows([10, 11], rng))
    published = StaticTable.from_metadata(publish(table))
    assert [(f.field_id, f.name) for f in published.schema().fields] == [(1, "id"), (2, "category"), (3, "value")]
    assert_same_rows(published.scan().to_arrow(), table.scan().to_arrow(), "upgraded")
    table.alter().rename_column("value", "amount").commit()
    renamed = StaticTable.from_metadata(publish(table))
    assert [(f.field_id, f.name) for f in renamed.schema().fields] == [(1, "id"), (2, "category"), (3, "amount")]
    assert_same_rows(renamed.scan().to_arrow(), table.scan().to_arrow(), "renamed")


def test_what_iceberg_v2_cannot_say_is_refused_and_nothing_is_published(tmp_path: Path) -> None:
    nested = pa.schema([pa.field("id", pa.int64(), nullable=False), ("tags", pa.list_(pa.uint8()))])
    table = castable.create_table(str(tmp_path / "nested"), nested, primary_key="id")
    table.append(pa.table({"id": [1], "tags": [[7]]}, schema=nested))
    with pytest.raises(IcebergPublishError, match="its field 'item' is uint8: Iceberg has no unsigned integers"):
        publish(table)
    assert not list(table.store.list(ICEBERG_PREFIX))
    table = castable.create_table(str(tmp_path / "default"), SCHEMA, primary_key="id", properties=FILES_ONLY)
    table.append(random_rows([1, 2], random.Random(1)))
    table.append(random_rows([3, 4], random.Random(2)))
    publish(table)
    table.alter().add_column("flag", pa.bool_(), default=True).commit()
    with pytest.raises(IcebergPublishError, match="default"):
        publish(table)
    hint = (tmp_path / "default" / ICEBERG_PREFIX / "version-hint.text").read_text()
    assert hint == str(table.version - 1), "the version published before stays the one readers see"
    table.compact(min_file_size=1 << 30)  # both files rewritten into one with the column: nothing to default
    assert len(table.manifest.data_files) == 1
    publish(table)
    assert_same_rows(read_by_pyiceberg(table, table.version), table.scan().to_arrow(), "after compaction")


def test_a_publication_catches_up_every_retained_version_it_missed(tmp_path: Path) -> None:
    rng = random.Random(4)
    table = castable.create_table(str(tmp_path / "t"), SCHEMA, primary_key="id")
    for i in range(6):
        table.append(random_rows(list(range(i * 5, i * 5 + 5)), rng))
    table.delete("id IN (2, 13)")
    table.expire(retain_versions=5)
    publish(table)
    snapshots = StaticTable.from_metadata(f"{table.uri}/{ICEBERG_PREFIX}v{table.version}.metadata.json").snapshots()
    assert [s.snapshot_id for s in snapshots] == [h.version for h in reversed(table.history())]
    for version in (s.snapshot_id for s in snapshots):
        assert_same_rows(read_by_pyiceberg(table, version), table.scan(version=version).to_arrow(), f"v{version}")


def test_publish_iceberg_publishes_after_each_commit_and_never_fails_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from castable.iceberg import background

    rng = random.Random(6)
    table = castable.create_table(str(tmp_path / "t"), SCHEMA, primary_key="id")
    table.append(random_rows(list(range(10)), rng))
    table.set_properties({"publish.iceberg": "true"})
    for i in range(1, 4):
        table.append(random_rows(list(range(i * 10, i * 10 + 10)), rng))
    table.delete("id = 15")
    background.flush()
    hint = (tmp_path / "t" / ICEBERG_PREFIX / "version-hint.text").read_text()
    assert hint == str(table.version)
    for version in range(1, table.version + 1):  # the first publication caught up the versions before it
        assert_same_rows(read_by_pyiceberg(table, version), table.scan(version=version).to_arrow(), f"v{version}")
    nested = pa.schema([pa.field("id", pa.int64(), nullable=False), ("tags", pa.list_(pa.uint8()))])
    other = castable.create_table(str(tmp_path / "n"), nested, primary_key="id", properties={"publish.iceberg": True})
    assert other.append(pa.table({"id": [1], "tags": [[7]]}, schema=nested)).version == 1, "the commit stands"
    background.flush()
    assert "could not publish version 1" in caplog.text and "unsigned" in caplog.text


def test_a_process_that_leaves_publication_to_another_publishes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With CASTABLE_ICEBERG_AFTER_COMMIT=false (the deployment's functions, whose catalog function
    publishes every commit) a commit to a table with publish.iceberg on starts no publication."""
    from castable.iceberg import background

    monkeypatch.setenv(AFTER_COMMIT, "false")
    table = castable.create_table(str(tmp_path / "t"), SCHEMA, primary_key="id", properties={"publish.iceberg": True})
    table.append(random_rows([1, 2], random.Random(1)))
    background.flush()
    assert not (tmp_path / "t" / ICEBERG_PREFIX).exists()
    assert publish(table).endswith("v1.metadata.json"), "publishing on demand still does"


def test_set_properties_commits_a_version_and_refuses_a_bad_setting(tmp_path: Path) -> None:
    table = castable.create_table(str(tmp_path / "t"), SCHEMA, primary_key="id")
    version = table.set_properties({"write.inline.max-bytes": "0", "owner": "data-team"}).version
    assert version == 1 and table.properties["write.inline.max-bytes"] == "0"
    assert castable.open_table(table.uri).properties["owner"] == "data-team"
    bad_settings: list[dict[str, object]] = [
        {"publish.iceberg": "yes"},
        {"write.parquet.bloom-filter-columns": "nope"},
        {"write.inline.maxbytes": 1},
    ]
    for bad in bad_settings:
        with pytest.raises(castable.InvalidInputError):
            table.set_properties(bad)
    assert castable.open_table(table.uri).version == version, "nothing committed"


def test_the_cli_publishes_and_sets_properties(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from castable.cli import app

    table = castable.create_table(str(tmp_path / "t"), SCHEMA, primary_key="id")
    table.append(random_rows([1, 2, 3], random.Random(1)))
    runner = CliRunner()
    out = runner.invoke(app, ["iceberg", "publish", table.uri, "--json"])
    assert out.exit_code == 0, out.output
    assert out.output.strip().endswith(f'"metadata_location": "{table.uri}/{ICEBERG_PREFIX}v1.metadata.json"}}')
    out = runner.invoke(app, ["set-properties", table.uri, "publish.iceberg=true"])
    assert out.exit_code == 0, out.output
    assert castable.open_table(table.uri).properties["publish.iceberg"] == "true"


def test_expire_and_gc_delete_the_iceberg_metadata_of_what_they_drop(tmp_path: Path) -> None:
    rng = random.Random(8)
    table = castable.create_table(
        str(tmp_path / "t"), SCHEMA, primary_key="id", properties={"write.inline.max-bytes": 2000}
    )
    for i in range(8):
        table.append(random_rows(list(range(i * 10, i * 10 + 10 + 60 * (i % 2))), rng))  # some inline, some files
        table.delete(f"id = {i * 10}")
        publish(table)
    table.compact(min_file_size=1 << 30)
    publish(table)
    before = {o.key for o in table.store.list(ICEBERG_PREFIX)}
    table.expire(retain_versions=1)  # only the compacted version: every segment and tombstone before it goes
    floor = table.version
    after = {o.key for o in table.store.list(ICEBERG_PREFIX)}
    assert f"{ICEBERG_PREFIX}v{floor - 1}.metadata.json" in before
    assert not any(
        k.endswith((f"/v{v}.metadata.json", f"/snap-{v}-castable.avro")) for k in after for v in range(floor)
    )
    static = StaticTable.from_metadata(f"{table.uri}/{ICEBERG_PREFIX}v{table.version}.metadata.json")
    assert [s.snapshot_id for s in static.snapshots()] == [table.version]
    report = table.gc(orphan_grace=timedelta(0))
    swept = after - {o.key for o in table.store.list(ICEBERG_PREFIX)}
    assert swept and swept <= set(report.objects)
    assert any("/inline/" in k for k in swept) and any(k.endswith("-deletes.parquet") for k in swept)
    assert_same_rows(read_by_pyiceberg(table, table.version), table.scan().to_arrow(), "what is left still reads")


def test_the_primary_key_is_the_identifier_field_where_it_is_not_null(tmp_path: Path) -> None:
    loose_schema = pa.schema([("id", pa.int64()), ("category", pa.string()), ("value", pa.float64())])
    rows = random_rows([1, 2], random.Random(2))
    for name, schema, expected in (("strict", SCHEMA, [1]), ("loose", loose_schema, [])):
        table = castable.create_table(str(tmp_path / name), schema, primary_key="id")
        table.append(rows.cast(schema))
        static = StaticTable.from_metadata(publish(table))
        assert static.schema().identifier_field_ids == expected
        assert_same_rows(static.scan().to_arrow(), table.scan().to_arrow(), name)


def test_an_older_snapshot_keeps_its_deletes_when_a_later_version_drops_a_file_they_name(tmp_path: Path) -> None:
    """A tombstone naming two files, one of which a later erase replaces, then listed again in a
    merged segment: its position deletes stay as the older snapshot needs them (written once)."""
    rng = random.Random(12)
    table = castable.create_table(str(tmp_path / "t"), SCHEMA, primary_key="id", properties=FILES_ONLY)
    table.append(random_rows(list(range(10)), rng))
    table.append(random_rows(list(range(10, 20)), rng))
    table.delete("id IN (3, 13)")
    publish(table)
    before = table.version
    table.erase("id = 15", mode="rewrite")
    for doomed in (0, 1, 2, 4, 5, 6, 7, 8, 9, 11, 12):  # enough tombstone segments that they are merged
        table.delete(f"id = {doomed}")
        publish(table)
    for version in (before, table.version):
        assert_same_rows(read_by_pyiceberg(table, version), table.scan(version=version).to_arrow(), f"v{version}")


def test_nested_columns_are_published_with_their_fields_ids_and_read_as_castable_reads_them(tmp_path: Path) -> None:
    """Structs in structs, lists, maps and a list of structs added later, through appends, inline
    rows, a delete, an upsert and compaction: pyiceberg reads every version as castable does,
    by the ids of the nested fields (docs/format.md section 4.1)."""
    table = nested_history(str(tmp_path / "t"))
    metadata = StaticTable.from_metadata(f"{table.uri}/{ICEBERG_PREFIX}v{table.version}.metadata.json")
    payload = metadata.metadata.schemas[0].find_type("payload")
    assert isinstance(payload, StructType)
    assert [f.field_id for f in payload.fields] == [4, 5, 6], "Iceberg's order: a struct's fields first"
    for version in range(1, table.version + 1):
        want = null_lists_empty(table.scan(version=version).to_arrow())
        assert_same_rows(null_lists_empty(read_by_pyiceberg(table, version)), want, f"v{version}")


def test_a_file_whose_nested_fields_have_no_ids_is_refused_until_compacted(tmp_path: Path) -> None:
    """A file registered from another writer holds the nested column without its fields' ids:
    Iceberg readers, reading by id, would not find them, so the version is refused, naming the
    way on; compaction rewrites the file with the ids and the next publication goes through."""
    table = castable.create_table(str(tmp_path / "t"), NESTED, primary_key="id")
    path = tmp_path / "t" / "data" / "theirs.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(nested_rows([1, 2]), path)
    table.add_files(["data/theirs.parquet"])
    with pytest.raises(IcebergPublishError, match=r"without the ids of its fields .* compact the table"):
        publish(table)
    table.compact(min_file_size=1 << 30)
    publish(table)
    assert_same_rows(read_by_pyiceberg(table, table.version), table.scan().to_arrow(), "after compaction")
