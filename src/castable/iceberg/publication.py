"""Publish a castable version as Iceberg metadata beside castable's own (docs/iceberg.md).

Everything lands under ``<table>/metadata/`` in the file-system layout Iceberg readers open
with no catalog: ``v<K>.metadata.json`` for castable version K (snapshot id and sequence
number K), its manifest list, manifests and position delete files, then
``version-hint.text`` naming K. Data files are referenced where they are.

The work is O(change): each castable segment becomes one Iceberg manifest, written once and
named after the segment (segments are immutable and shared between versions, so are the
manifests); each castable tombstone becomes one position delete file (tombstones are
immutable, and Iceberg unions a data file's position deletes as castable unions its
tombstones). Manifests already listed by the last published version are reused from its
manifest list; anything else is written again, so a publication that crashed half way is
repaired by the next one. The hint moves last and only forward (compare-and-swap), so a reader
never sees metadata that names a file not yet written. What the manifests say of each file (its
description, statistics and entry) is :mod:`castable.iceberg.manifests`'.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.avro.codecs import AvroCompressionCodec
from pyiceberg.manifest import (
    DataFile as IcebergDataFile,
)
from pyiceberg.manifest import (
    ManifestContent,
    ManifestEntry,
    ManifestFile,
    ManifestWriter,
    read_manifest_list,
    write_manifest,
    write_manifest_list,
)
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.serializers import FromInputFile
from pyiceberg.table.metadata import TableMetadataV2
from pyiceberg.table.name_mapping import parse_mapping_from_json
from pyiceberg.table.snapshots import Operation

from castable.commit.pointer import retention_floor
from castable.errors import VersionNotFoundError
from castable.format import inline
from castable.format.entries import DataFile, TombstoneFile
from castable.format.evolution import FIELD_ID, last_column_id, resolve
from castable.format.filelist import Part
from castable.format.layout import ICEBERG_HINT, ICEBERG_PREFIX
from castable.format.tombstone import FileDeletes
from castable.iceberg.files import StoredFileIO, StoredInput, StoredOutput
from castable.iceberg.manifests import (
    POSITION_DELETES,
    DeleteManifestWriter,
    Described,
    data_file_entry,
    manifest_entry,
    position_delete_entry,
    write_entries,
)
from castable.iceberg.partitions import iceberg_spec, partition_record
from castable.iceberg.schema import (
    IcebergPublishError,
    check_file,
    iceberg_schema,
    mapped_names,
    maps_otherwise,
    name_mapping,
)
from castable.read.snapshot import Snapshot as CastableSnapshot
from castable.store import ObjectNotFoundError, ObjectStore, PreconditionFailedError
from castable.store.readahead import read_ahead
from castable.store.threads import shared_pool

log = logging.getLogger(__name__)

METADATA = ICEBERG_PREFIX
HINT = ICEBERG_HINT
INLINE = f"{METADATA}inline/"
"""Inline entries' rows as the one-row-group Parquet files they read as: Iceberg readers need files."""
CODEC: AvroCompressionCodec = "deflate"
"""Avro's codec every Iceberg reader knows (DuckDB's avro extension reads no zstd)."""
FOOTERS_IN_FLIGHT = 32
"""Footers read at once from an object store, where each is a round trip."""
PUTS_IN_FLIGHT = 16
"""Objects of one publication put at once."""
METADATA_LOG = 100
"""Earlier metadata files each new one lists."""
NAME_MAPPING = "schema.name-mapping.default"
VERSION = "castable.version"
"""The metadata property naming the castable version it publishes."""
UNMAPPED = "castable.names-without-ids"
"""The metadata property listing the column names held by data files without field ids (JSON),
so that a schema change looks for misread files only when it maps one of those names anew."""
_OPERATIONS = {"append": Operation.APPEND, "delete": Operation.DELETE, "erase": Operation.DELETE}
_REPLACING = {"compact", "alter", "set-properties", "upgrade"}
"""Operations that leave the rows as they were: Iceberg's ``replace``."""


def metadata_key(version: int) -> str:
    return f"{METADATA}v{version}.metadata.json"


@dataclass(frozen=True)
class Published:
    """One publication: the version, where its metadata is, and that metadata."""

    version: int
    location: str
    metadata: TableMetadataV2


@dataclass(frozen=True)
class _State:
    """What a publication starts from, read at once: the hint and its ETag, the metadata of the
    version asked for if that file exists, and the retention floor."""

    hint: int | None
    etag: str | None
    found: TableMetadataV2 | None
    floor: int


def publish_through(
    store: ObjectStore,
    version: int,
    snapshot_of: Callable[[int], CastableSnapshot],
    *,
    again: bool = False,
    previous: TableMetadataV2 | None = None,
) -> Published:
    """Publish ``version`` of the table at ``store``, and before it every retained version the
    last publication did not reach (all retained ones, the first time): one Iceberg snapshot
    per castable version, for time travel by snapshot id or timestamp. ``snapshot_of`` reads a
    version. Idempotent; ``IcebergPublishError`` if a version holds something Iceberg readers
    would read differently (a version before it that cannot be is left out, with a warning).
    ``again`` writes ``version``'s metadata anew even if it is published, listing only the
    versions retained now (after an expiry). ``previous``: metadata of an earlier version the
    caller holds, used instead of reading it again if the hint names that version."""
    state = _read_state(store, version)
    done = state.hint is not None and state.hint >= version and not (again and state.hint == version)
    if done and state.found is not None:
        return Published(version, _location(store, metadata_key(version)), state.found)
    first = max(state.floor, 0 if state.hint is None else state.hint + 1)
    for v in range(first, version):
        try:
            _Publication(store, snapshot_of(v), snapshot_of, state.floor).run()
        except VersionNotFoundError:  # expired meanwhile: the next is the oldest retained
            continue
        except IcebergPublishError as e:  # that version has no snapshot; later ones may read right
            log.warning("version %d of %s is not published as Iceberg: %s", v, store.uri, e)
    known = (state.hint, state.etag) if first >= version else None
    return _Publication(store, snapshot_of(version), snapshot_of, state.floor).run(
        again=again, known=known, previous=previous
    )


def _read_state(store: ObjectStore, version: int) -> _State:
    """The hint, ``version``'s metadata and the retention floor, read concurrently (each is a
    round trip to an object store, and a catalog's commit waits for them)."""
    pool = shared_pool("publication-reads", 24)  # its tasks are GETs and LISTs; none waits on this pool
    hint = pool.submit(read_hint, store)
    found = pool.submit(_read_metadata, store, metadata_key(version))
    floor = pool.submit(retention_floor, store)
    return _State(*hint.result(), found.result(), floor.result())


def _location(store: ObjectStore, key: str) -> str:
    return f"{store.uri.rstrip('/')}/{key}"


def _read_metadata(store: ObjectStore, key: str) -> TableMetadataV2 | None:
    """The metadata file ``key`` (``None``: there is none, or not of format version 2)."""
    try:
        found = FromInputFile.table_metadata(StoredInput(store, key, _location(store, key)))
    except ObjectNotFoundError:
        return None
    return found if isinstance(found, TableMetadataV2) else None


def read_hint(store: ObjectStore) -> tuple[int | None, str | None]:
    """The version ``version-hint.text`` names (``None``: none, or unreadable) and its ETag."""
    try:
        blob = store.get(HINT)
    except ObjectNotFoundError:
        return None, None
    text = blob.data.decode(errors="replace").strip()
    return (int(text), blob.etag) if text.isdigit() else (None, blob.etag)


class _Publication:
    """The publication of one version; paths start at the store's URI."""

    def __init__(
        self,
        store: ObjectStore,
        snapshot: CastableSnapshot,
        snapshot_of: Callable[[int], CastableSnapshot],
        floor: int,
    ) -> None:
        self.store = store
        self.snapshot = snapshot
        self.snapshot_of = snapshot_of
        self.floor = floor
        """The retention floor: older snapshots are not listed."""
        self._left_out: set[int] = set()
        """Older snapshots left out of this version's metadata (see :meth:`_misread`)."""
        self._unmapped: set[str] | None = set()
        """The names of the columns held by data files without field ids in the published
        snapshots (``None``: not known, for metadata published before castable kept them)."""
        self.root = store.uri.rstrip("/")
        self.version = snapshot.manifest.version
        self._described = Described(store, [])
        self._pending: dict[str, bytes] = {}
        """The objects this publication writes, put at once before the hint moves."""
        self.parent = -1
        """The snapshot this version's follows (-1: none); set by ``run``."""

    def location(self, key: str) -> str:
        return _location(self.store, key)

    def run(
        self,
        *,
        again: bool = False,
        known: tuple[int | None, str | None] | None = None,
        previous: TableMetadataV2 | None = None,
    ) -> Published:
        """Publish the version; ``known``: the hint and its ETag as just read, ``previous``:
        metadata the caller holds (used if it is the version the hint names)."""
        location = self.location(metadata_key(self.version))
        hint, hint_etag = known or read_hint(self.store)
        if hint is not None and hint >= self.version and not (again and hint == self.version):
            done = _read_metadata(self.store, metadata_key(self.version))
            if done is not None:
                return Published(self.version, location, done)
        if hint is None or hint > self.version:
            previous = None
        elif previous is None or previous.properties.get(VERSION) != str(hint):
            previous = _read_metadata(self.store, metadata_key(hint))
        schema = self._schema(previous)
        before = [s.snapshot_id for s in (previous.snapshots if previous is not None else [])]
        self.parent = max((v for v in before if v < self.version), default=-1)
        reusable = self._listed(previous)
        if previous is not None:
            unmapped = previous.properties.get(UNMAPPED)
            self._unmapped = None if unmapped is None else set(json.loads(unmapped))
        if previous is not None and previous.current_schema_id != schema.schema_id:
            self._check_files()  # the manifests stand (older snapshots read them); the files must suit the new schema
            self._left_out = self._misread(previous)
        manifests: list[ManifestFile] = []
        data_parts = [(p, self._manifest_key(p)) for p in self.snapshot.manifest.data_files.parts]
        listed_now = {self.location(key) for _, key in data_parts}
        self._described = Described(
            self.store,
            [m for path, m in reusable.items() if path not in listed_now and m.content == ManifestContent.DATA],
        )
        for data, key in data_parts:
            manifests += self._reused(reusable, key) or self._data_manifests(data, key, schema)
        for tombstones in self.snapshot.manifest.tombstones.parts:
            key = self._manifest_key(tombstones)
            manifests += self._reused(reusable, key) or self._delete_manifests(tombstones, key, schema)
        listed = None
        if self.version:  # version 0, the empty table, is published as a table with no snapshot
            listed = self._out(f"{METADATA}snap-{self.version}-castable.avro")
            parent = self.parent if self.parent >= 0 else None
            with write_manifest_list(2, listed, self.version, parent, self.version, CODEC) as writer:
                writer.add_manifests(manifests)
        metadata = self._table_metadata(previous, schema, listed.location if listed is not None else None)
        self._pending[metadata_key(self.version)] = metadata.model_dump_json().encode()
        self._put_pending()
        self._advance_hint(hint, hint_etag)
        return Published(self.version, location, metadata)

    def _schema(self, previous: TableMetadataV2 | None) -> Schema:
        """This version's schema, under the id it had in the last publication if it is the same."""
        known = previous.schemas if previous is not None else []
        pk = self.snapshot.manifest.primary_key
        fresh = iceberg_schema(self.snapshot.schema, list(pk), 1 + max((s.schema_id for s in known), default=-1))
        for s in known:
            if s.fields == fresh.fields and s.identifier_field_ids == fresh.identifier_field_ids:
                return s
        return fresh

    def _listed(self, previous: TableMetadataV2 | None) -> dict[str, ManifestFile]:
        """The manifests the last published version lists, by path: written already."""
        if previous is None or previous.current_snapshot_id is None:
            return {}
        current = previous.snapshot_by_id(previous.current_snapshot_id)
        if current is None or not current.manifest_list.startswith(self.root):
            return {}
        try:
            return {
                m.manifest_path: m
                for m in read_manifest_list(StoredFileIO(self.store).new_input(current.manifest_list))
            }
        except ObjectNotFoundError:
            return {}

    def _manifest_key(self, part: Part[DataFile] | Part[TombstoneFile]) -> str:
        """The Iceberg manifest of a castable segment, named after it (both are immutable); a
        segment of files of several partition specs has one manifest per spec (an Iceberg
        manifest holds files of one spec), named by :func:`_spec_key`."""
        if part.ref is None:
            raise IcebergPublishError(f"version {self.version} has a segment not yet written")
        name = part.ref.path.rsplit("/", 1)[-1].removesuffix(".arrow")
        return f"{METADATA}castable-{part.ref.kind}-{name}.avro"

    def _reused(self, reusable: Mapping[str, ManifestFile], key: str) -> list[ManifestFile]:
        """The manifests the last publication wrote for the segment of manifest ``key``: all
        of them or none, as one publication writes a segment's manifests together."""
        whole = self.location(key)
        spec_prefix = whole.removesuffix(".avro") + "-spec"
        return [m for path, m in reusable.items() if path == whole or path.startswith(spec_prefix)]

    def _spec_manifests(
        self,
        key: str,
        by_spec: Mapping[int, list[ManifestEntry]],
        writer: Callable[[PartitionSpec, Schema, StoredOutput], ManifestWriter],
        schema: Schema,
    ) -> list[ManifestFile]:
        """One manifest of ``writer``'s kind per spec of ``by_spec``'s entries."""
        partitioning = self.snapshot.manifest.partitioning
        return [
            write_entries(
                writer(iceberg_spec(partitioning, spec_id), schema, self._out(_spec_key(key, spec_id, by_spec))),
                entries,
            )
            for spec_id, entries in sorted(by_spec.items())
        ]

    def _data_manifests(self, part: Part[DataFile], key: str, schema: Schema) -> list[ManifestFile]:
        """The data files of a data segment (each checked, inline entries written as files), in
        a manifest per partition spec. A file the last publication described, in a segment since
        merged into this one, keeps its description: its footer is not read again."""
        files = part.entries(self.snapshot.schema)
        located = {f.path: self._data_file(f) for f in files}
        described: dict[str, IcebergDataFile] = {}
        for f in files:
            if (known := self._described.get(*located[f.path])) is not None:
                described[f.path] = known
        unknown = [f for f in files if f.path not in described]
        for f, footer in zip(unknown, self._footers(unknown), strict=True):
            held = footer.schema.to_arrow_schema()
            check_file(f.path, held, self.snapshot.schema, self.snapshot.columns_of(f, footer))
            self._note_ids(held)
            partition = partition_record(f, self.snapshot.manifest.partitioning, self.snapshot.schema)
            described[f.path] = data_file_entry(*located[f.path], footer, f.spec_id, partition, f.sort_order_id)
        by_spec: dict[int, list[ManifestEntry]] = {}
        for f in files:
            entry = manifest_entry(f.added_version, self.parent, self.version, described[f.path])
            by_spec.setdefault(f.spec_id, []).append(entry)

        def writer(spec: PartitionSpec, schema: Schema, out: StoredOutput) -> ManifestWriter:
            return write_manifest(2, spec, schema, out, self.version, CODEC)

        return self._spec_manifests(key, by_spec, writer, schema)

    def _out(self, key: str) -> StoredOutput:
        return StoredOutput(self.store, key, self.location(key), self._pending)

    def _put_pending(self) -> None:
        """Put every object of this publication, many at once: none is read before the hint
        names the version (and the catalog answers), so their order does not matter."""
        pool = shared_pool("publication-writes", PUTS_IN_FLIGHT)  # its tasks are PUTs; none waits on this pool
        list(pool.map(lambda item: self.store.put(*item), self._pending.items()))
        self._pending.clear()

    def _data_file(self, f: DataFile) -> tuple[str, int]:
        """Where Iceberg readers find ``f``, and its size: where it is, or for an inline entry
        the file of its rows, written now under ``metadata/inline/`` (once: its bytes never
        change), of the size it has (an entry from before data files stored timestamps in
        microseconds recorded its rows' size in milliseconds, and may be published so)."""
        if f.inline is None:
            return self.location(f.path), f.size
        key = f"{INLINE}{f.path.rsplit('/', 1)[-1]}"
        if key in self._pending:
            return self.location(key), len(self._pending[key])
        try:
            return self.location(key), self.store.head(key).size
        except ObjectNotFoundError:
            data = self._pending[key] = inline.parquet_bytes(f.inline)
            return self.location(key), len(data)

    def _delete_manifests(self, part: Part[TombstoneFile], key: str, schema: Schema) -> list[ManifestFile]:
        """The position delete files of a tombstone segment's tombstones, in a delete manifest per spec."""
        by_spec: dict[int, list[ManifestEntry]] = {}
        for t in part.entries(self.snapshot.schema):
            for spec_id, written in self._position_deletes(t):
                entry = manifest_entry(t.added_version, self.parent, self.version, written)
                by_spec.setdefault(spec_id, []).append(entry)

        def writer(spec: PartitionSpec, schema: Schema, out: StoredOutput) -> ManifestWriter:
            return DeleteManifestWriter(spec, schema, out, self.version, CODEC)

        return self._spec_manifests(key, by_spec, writer, schema)

    def _footers(self, files: list[DataFile]) -> Iterator[pq.FileMetaData]:
        """The footers of ``files``, in order; from an object store many at once (the first
        publication of a table reads every file's)."""
        if self.store.native_input:
            return map(self.snapshot.footer, files)
        return read_ahead((partial(self.snapshot.footer, f) for f in files), FOOTERS_IN_FLIGHT)

    def _check_files(self) -> None:
        """Check every data file of the version against its schema (after a schema change)."""
        files = list(self.snapshot.manifest.data_files)
        for f, footer in zip(files, self._footers(files), strict=True):
            held = footer.schema.to_arrow_schema()
            check_file(f.path, held, self.snapshot.schema, self.snapshot.columns_of(f, footer))
            self._note_ids(held)

    def _note_ids(self, held: pa.Schema) -> None:
        """Keep the column names of a published file that has no field ids."""
        if self._unmapped is not None and not any(FIELD_ID in (f.metadata or {}) for f in held):
            self._unmapped.update(held.names)

    def _misread(self, previous: TableMetadataV2) -> set[int]:
        """The older snapshots of ``previous`` that hold a data file without field ids that the
        name mapping of this version's schema maps otherwise than castable reads it (a name of
        the file now belongs to another column). Readers apply the table's current mapping to
        every snapshot's files, time travel and incremental reads alike: such snapshots are left
        out of the metadata (castable still reads those versions)."""
        schema = self.snapshot.schema
        mapped = mapped_names(schema)
        mapping = parse_mapping_from_json(previous.properties.get(NAME_MAPPING, "[]"))
        before = {n: m.field_id for m in mapping for n in m.names}
        if self._unmapped is not None and all(mapped.get(n) == before.get(n) for n in self._unmapped):
            return set()  # every file without ids was published under the same mapping of its names
        if self._unmapped is None:
            self._unmapped = set()  # found below, from every published file
        verdicts: dict[str, bool] = {}  # by segment: versions share most of theirs
        misread = set()
        for s in previous.snapshots:
            if s.snapshot_id >= self.version:
                continue
            try:
                older = self.snapshot_of(s.snapshot_id)
            except VersionNotFoundError:
                continue
            for part in older.manifest.data_files.parts:
                key = part.ref.path if part.ref is not None else f"pending {s.snapshot_id}"
                if key not in verdicts:  # every file looked at, so that each one's names are kept
                    verdicts[key] = any(
                        [
                            self._maps_otherwise(older, f, schema, mapped)
                            for f in part.entries(older.schema)
                            if f.inline is None
                        ]
                    )
                if verdicts[key]:
                    misread.add(s.snapshot_id)
        return misread

    def _maps_otherwise(
        self, older: CastableSnapshot, f: DataFile, schema: pa.Schema, mapped: Mapping[str, int | None]
    ) -> bool:
        held = older.footer(f).schema.to_arrow_schema()
        self._note_ids(held)
        return maps_otherwise(held, schema, resolve(held, schema, f.added_version), mapped) is not None

    def _position_deletes(self, t: TombstoneFile) -> list[tuple[int, IcebergDataFile]]:
        """The rows tombstone ``t`` deletes, by file and position, as Iceberg position delete
        files with their spec ids: one per partition of the files it names (a reader applies a
        position delete file to the data files of its partition), none if it deletes no row of
        this version's files.

        Each is written once, by the first publication of a version that lists ``t`` (which holds
        every file ``t`` names that any published version holds), and never again: an older
        snapshot reads the same file, and a later version may no longer hold some of those files."""
        named = self.snapshot.tombstone_deletes(t)
        groups: dict[tuple[int, tuple[object, ...]], list[DataFile]] = {}
        for f in self.snapshot.manifest.data_files.named(named):
            groups.setdefault((f.spec_id, f.partition), []).append(f)
        name = t.path.rsplit("/", 1)[-1].removesuffix(".del")
        out = []
        for (spec_id, values), files in sorted(groups.items(), key=lambda g: json.dumps(g[0])):
            suffix = "" if not values else "-" + hashlib.sha256(json.dumps([spec_id, values]).encode()).hexdigest()[:16]
            key = f"{METADATA}castable-{name}-deletes{suffix}.parquet"
            written = self._delete_file(key, files, named)
            if written is not None:
                partition = partition_record(files[0], self.snapshot.manifest.partitioning, self.snapshot.schema)
                out.append((spec_id, position_delete_entry(self.location(key), written, spec_id, partition)))
        return out

    def _delete_file(self, key: str, files: list[DataFile], named: Mapping[str, FileDeletes]) -> bytes | None:
        """The position delete file at ``key`` of ``files``' deleted rows: as written already, or
        written now (``None``: none of their rows is deleted)."""
        try:
            return self.store.get(key).data
        except ObjectNotFoundError:
            pass
        paths: list[pa.Array] = []
        positions: list[pa.Array] = []
        located = sorted(((self._data_file(f)[0], f, named[f.path]) for f in files), key=lambda x: x[0])
        for location, f, deletes in located:  # the spec: sorted by file_path, then pos
            found = self.snapshot.deleted_positions(f, self.snapshot.footer(f), deletes)
            if len(found):
                positions.append(pa.array(found, pa.int64()))
                paths.append(pa.array([location] * len(found), pa.string()))
        if not positions:
            return None
        rows = pa.Table.from_arrays([pa.concat_arrays(paths), pa.concat_arrays(positions)], schema=POSITION_DELETES)
        sink = io.BytesIO()
        pq.write_table(rows, sink, compression="zstd")
        data = self._pending[key] = sink.getvalue()
        return data

    def _table_metadata(
        self, previous: TableMetadataV2 | None, schema: Schema, manifest_list: str | None
    ) -> TableMetadataV2:
        """``v<K>.metadata.json``: the last publication's snapshots of versions still retained,
        then this version's, current; the schemas they use."""
        m = self.snapshot.manifest
        floor = self.floor
        millis = int(m.created_at.timestamp() * 1000)
        before = previous.snapshots if previous is not None else []
        kept = [
            s.model_dump(by_alias=True, exclude_none=True)
            for s in before
            if floor <= s.snapshot_id < self.version and s.snapshot_id not in self._left_out
        ]
        summary = {
            "operation": _operation(m.commit.operation),
            "castable.operation": m.commit.operation,
            "castable.commit.protocol-id": m.commit.commit_id,
        }
        snapshot = {
            "snapshot-id": self.version,
            "sequence-number": self.version,
            "timestamp-ms": millis,
            "manifest-list": manifest_list,
            "summary": summary,
            "schema-id": schema.schema_id,
        }
        if kept:
            snapshot["parent-snapshot-id"] = kept[-1]["snapshot-id"]
        snapshots = [*kept, snapshot] if manifest_list is not None else kept
        used = {s["schema-id"] for s in snapshots}
        schemas = [s for s in (previous.schemas if previous is not None else []) if s.schema_id in used]
        schemas = [*(s for s in schemas if s.schema_id != schema.schema_id), schema]
        log = [e.model_dump(by_alias=True) for e in (previous.metadata_log if previous is not None else [])]
        if previous is not None and previous.current_snapshot_id not in (None, self.version):
            log.append(
                {
                    "metadata-file": self.location(metadata_key(previous.current_snapshot_id)),
                    "timestamp-ms": previous.last_updated_ms,
                }
            )
        return TableMetadataV2.model_validate(
            {
                "format-version": 2,
                "table-uuid": m.table_uuid,
                "location": self.root,
                "last-sequence-number": self.version,
                "last-updated-ms": millis,
                "last-column-id": max(last_column_id(self.snapshot.schema), schema.highest_field_id),
                "schemas": [s.model_dump(by_alias=True) for s in schemas],
                "current-schema-id": schema.schema_id,
                "partition-specs": [s.to_json() for s in m.partitioning.specs],
                "default-spec-id": m.partitioning.default_spec_id,
                "last-partition-id": m.partitioning.last_field_id,
                "properties": {
                    VERSION: str(self.version),
                    NAME_MAPPING: name_mapping(self.snapshot.schema),
                    **({} if self._unmapped is None else {UNMAPPED: json.dumps(sorted(self._unmapped))}),
                },
                **({"current-snapshot-id": self.version} if manifest_list is not None else {}),
                "snapshots": snapshots,
                "snapshot-log": [
                    {"snapshot-id": s["snapshot-id"], "timestamp-ms": s["timestamp-ms"]} for s in snapshots
                ],
                "metadata-log": log[-METADATA_LOG:],
                "sort-orders": [o.to_json() for o in m.sorting.orders],
                "default-sort-order-id": m.sorting.default_order_id,
                "refs": {"main": {"snapshot-id": self.version, "type": "branch"}} if manifest_list is not None else {},
            }
        )

    def _advance_hint(self, hint: int | None, etag: str | None) -> None:
        """Move ``version-hint.text`` to this version unless it names a newer one already."""
        while hint is None or hint < self.version:
            try:
                if etag is None:
                    self.store.put(HINT, str(self.version).encode(), if_none_match=True)
                else:
                    self.store.put(HINT, str(self.version).encode(), if_match=etag)
                return
            except PreconditionFailedError:
                hint, etag = read_hint(self.store)


def _spec_key(key: str, spec_id: int, by_spec: Mapping[int, object]) -> str:
    """The key of a segment's manifest of spec ``spec_id``: the segment's manifest key when all
    its files are of spec 0 (every unpartitioned table), else ``...-spec<id>.avro``."""
    return key if set(by_spec) == {0} else f"{key.removesuffix('.avro')}-spec{spec_id}.avro"


def _operation(operation: str) -> str:
    """Iceberg's name for what a castable operation did to the rows."""
    if operation in _REPLACING:
        return Operation.REPLACE.value
    return _OPERATIONS.get(operation, Operation.OVERWRITE).value
