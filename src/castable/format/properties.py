"""Table properties: their names, defaults and validation (documented in docs/format.md)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from castable.errors import InvalidInputError
from castable.format import schedules
from castable.format.schedules import Schedule

TARGET_FILE_SIZE = "write.target-file-size-bytes"
ROW_GROUP_SIZE = "write.row-group-size-bytes"
COMPRESSION = "write.parquet.compression"
COMPRESSION_LEVEL = "write.parquet.compression-level"
BLOOM_FILTER_COLUMNS = "write.parquet.bloom-filter-columns"
INLINE_MAX_BYTES = "write.inline.max-bytes"
PRIMARY_KEY_ENFORCE = "write.primary-key.enforce"
INLINE_MAX_TOTAL_BYTES = "write.inline.max-total-bytes"
COMMIT_TIMEOUT_SECONDS = "commit.timeout-seconds"
COMMIT_ID_RETENTION = "commit.id-retention"
COMMIT_FAIR_TURNS = "commit.fair-turns"
COMPACT_MIN_FILE_SIZE = "compaction.min-file-size-bytes"
COMPACT_DELETE_RATIO = "compaction.delete-ratio"
RETAIN_VERSIONS = "history.retain-versions"
RETAIN_SECONDS = "history.retain-for-seconds"
ORPHAN_GRACE_SECONDS = "gc.orphan-grace-seconds"
PUBLISH_ICEBERG = "publish.iceberg"
INGEST_MODE = "ingest.mode"
INGEST_SCHEMA_MODE = "ingest.schema-mode"
INGEST_OP_COLUMN = "ingest.op-column"
MAINTENANCE_SCHEDULE = "maintenance.schedule"
DROPPED = "castable.dropped"
"""Set (to the time of the drop) by a catalog's drop that keeps the files: opening the table is
refused until it is registered again or purged (docs/format.md section 9)."""
AFTER_COMMIT = "CASTABLE_ICEBERG_AFTER_COMMIT"
"""Environment variable: ``false`` where a process leaves the publication of its commits
(``publish.iceberg``) to another that publishes every commit, such as the deployment's catalog
function (docs/iceberg.md): its commits then start no publication of their own."""

DEFAULTS: dict[str, str] = {
    TARGET_FILE_SIZE: str(256 * 1024 * 1024),
    ROW_GROUP_SIZE: str(32 * 1024 * 1024),
    COMPRESSION: "zstd",
    BLOOM_FILTER_COLUMNS: "",
    INLINE_MAX_BYTES: str(64 * 1024),
    PRIMARY_KEY_ENFORCE: "false",
    INLINE_MAX_TOTAL_BYTES: str(4 * 1024 * 1024),
    COMMIT_TIMEOUT_SECONDS: "120",
    COMMIT_ID_RETENTION: "1000",
    COMMIT_FAIR_TURNS: "true",
    COMPACT_MIN_FILE_SIZE: str(64 * 1024 * 1024),
    COMPACT_DELETE_RATIO: "0.2",
    RETAIN_VERSIONS: "100",
    RETAIN_SECONDS: str(7 * 24 * 3600),
    ORPHAN_GRACE_SECONDS: str(24 * 3600),
    PUBLISH_ICEBERG: "false",
    INGEST_MODE: "append",
    INGEST_SCHEMA_MODE: "strict",
    INGEST_OP_COLUMN: "",
    MAINTENANCE_SCHEDULE: "rate(6 hours)",
}
_CODECS = {"none", "snappy", "gzip", "brotli", "lz4", "zstd"}


@dataclass(frozen=True)
class TableProperties:
    """The typed view of a table's string properties."""

    target_file_size: int
    row_group_size: int
    compression: str
    compression_level: int | None
    bloom_filter_columns: tuple[str, ...]
    """Columns whose row groups get a bloom filter, for reads of points (``id = 7``, ``IN``)."""
    inline_max_bytes: int
    """A write of at most this many bytes of Arrow rows keeps them inline (``castable.format.inline``); 0: never."""
    inline_max_total_bytes: int
    """Writes stop keeping rows inline once a version's inline entries stand for this many bytes."""
    primary_key_enforce: bool
    """Whether a write that adds rows refuses keys already live or repeated (``castable.ops.uniqueness``)."""
    commit_timeout_seconds: float
    commit_id_retention: int
    commit_fair_turns: bool
    """Whether writers that keep losing take turns (``castable.commit.turns``)."""
    compact_min_file_size: int
    compact_delete_ratio: float
    retain_versions: int
    retain_seconds: int
    orphan_grace_seconds: int
    publish_iceberg: bool
    """Whether each commit of this handle publishes Iceberg metadata after it (``castable.iceberg``)."""
    ingest_mode: str
    """How the deployment ingests files landing for the table: ``append`` or ``upsert`` (by primary key)."""
    ingest_schema_mode: str
    """What a landed Parquet file with new columns does: ``strict`` (refused) or ``merge`` (added)."""
    ingest_op_column: str | None
    """With ``upsert``: the landed files' operation column (a change feed; ``d``/``delete`` deletes)."""
    maintenance_schedule: Schedule | None
    """When the deployment maintains the table (``None``: never)."""

    @classmethod
    def parse(cls, props: Mapping[str, str]) -> TableProperties:
        merged = {**DEFAULTS, **props}

        def positive(name: str) -> int:
            try:
                value = int(merged[name])
            except ValueError:
                raise InvalidInputError(f"property {name} must be an integer, not {merged[name]!r}") from None
            if value <= 0:
                raise InvalidInputError(f"property {name} must be positive, not {value}")
            return value

        def non_negative(name: str) -> int:
            value = int(merged[name]) if merged[name].strip().isdigit() else -1
            if value < 0:
                raise InvalidInputError(f"property {name} must be a whole number of bytes, not {merged[name]!r}")
            return value

        def positive_number(name: str) -> float:
            try:
                value = float(merged[name])
            except ValueError:
                value = -1.0
            if not 0 < value < float("inf"):
                raise InvalidInputError(f"property {name} must be a positive number, not {merged[name]!r}")
            return value

        try:
            ratio = float(merged[COMPACT_DELETE_RATIO])
        except ValueError:
            ratio = -1.0
        if not 0 < ratio <= 1:
            raise InvalidInputError(f"property {COMPACT_DELETE_RATIO} must be a number in (0, 1]")
        codec = merged[COMPRESSION].lower()
        if codec not in _CODECS:
            raise InvalidInputError(f"property {COMPRESSION} must be one of {sorted(_CODECS)}")
        level = merged.get(COMPRESSION_LEVEL)

        def flag(name: str) -> bool:
            value = merged[name].lower()
            if value not in ("true", "false"):
                raise InvalidInputError(f"property {name} must be true or false, not {merged[name]!r}")
            return value == "true"

        mode, schema_mode, op_column = _ingest(merged)
        return cls(
            target_file_size=positive(TARGET_FILE_SIZE),
            row_group_size=positive(ROW_GROUP_SIZE),
            compression=codec,
            compression_level=None if level is None else positive(COMPRESSION_LEVEL),
            bloom_filter_columns=tuple(c.strip() for c in merged[BLOOM_FILTER_COLUMNS].split(",") if c.strip()),
            inline_max_bytes=non_negative(INLINE_MAX_BYTES),
            inline_max_total_bytes=non_negative(INLINE_MAX_TOTAL_BYTES),
            primary_key_enforce=flag(PRIMARY_KEY_ENFORCE),
            commit_timeout_seconds=positive_number(COMMIT_TIMEOUT_SECONDS),
            commit_id_retention=positive(COMMIT_ID_RETENTION),
            commit_fair_turns=flag(COMMIT_FAIR_TURNS),
            compact_min_file_size=positive(COMPACT_MIN_FILE_SIZE),
            compact_delete_ratio=ratio,
            retain_versions=positive(RETAIN_VERSIONS),
            retain_seconds=positive(RETAIN_SECONDS),
            orphan_grace_seconds=positive(ORPHAN_GRACE_SECONDS),
            publish_iceberg=flag(PUBLISH_ICEBERG),
            ingest_mode=mode,
            ingest_schema_mode=schema_mode,
            ingest_op_column=op_column,
            maintenance_schedule=_schedule(merged[MAINTENANCE_SCHEDULE]),
        )


def _ingest(merged: Mapping[str, str]) -> tuple[str, str, str | None]:
    """The ``ingest.*`` settings, checked together (a change feed is upserted; a schema is merged
    into by appends only)."""
    mode, schema_mode, op_column = merged[INGEST_MODE], merged[INGEST_SCHEMA_MODE], merged[INGEST_OP_COLUMN].strip()
    if mode not in ("append", "upsert"):
        raise InvalidInputError(f"property {INGEST_MODE} must be append or upsert, not {mode!r}")
    if schema_mode not in ("strict", "merge"):
        raise InvalidInputError(f"property {INGEST_SCHEMA_MODE} must be strict or merge, not {schema_mode!r}")
    if schema_mode == "merge" and mode != "append":
        raise InvalidInputError(f"property {INGEST_SCHEMA_MODE}=merge needs {INGEST_MODE}=append")
    if op_column and mode != "upsert":
        raise InvalidInputError(f"property {INGEST_OP_COLUMN} needs {INGEST_MODE}=upsert")
    return mode, schema_mode, op_column or None


def _schedule(expression: str) -> Schedule | None:
    try:
        return schedules.parse(expression)
    except InvalidInputError as e:
        raise InvalidInputError(f"property {MAINTENANCE_SCHEDULE}: {e}") from None


_NAMESPACES = tuple({name.split(".")[0] + "." for name in DEFAULTS})
_KNOWN = {*DEFAULTS, COMPRESSION_LEVEL}


def unknown_setting(name: str) -> bool:
    """Whether ``name`` lies in one of castable's namespaces without being a setting castable
    knows (:func:`normalize` refuses it)."""
    return name.startswith(_NAMESPACES) and name not in _KNOWN


def normalize(props: Mapping[str, object] | None) -> dict[str, str]:
    """Properties as stored: string keys and values, checked by parsing them once.

    A name in one of castable's namespaces (``write.``, ``commit.``, ...) must be one castable
    knows, so a misspelt setting is refused rather than silently ignored; other names are the
    user's own and kept as given.
    """
    out = {str(k): str(v) for k, v in (props or {}).items()}
    for name in sorted(filter(unknown_setting, out)):
        nearest = difflib.get_close_matches(name, _KNOWN, n=1)
        hint = f"; did you mean {nearest[0]!r}?" if nearest else f"; castable's are {sorted(_KNOWN)}"
        raise InvalidInputError(f"unknown table property {name!r}{hint}")
    TableProperties.parse(out)
    return out


def checked(props: Mapping[str, object] | None, schema: pa.Schema, primary_key: Sequence[str]) -> dict[str, str]:
    """:func:`normalize`, the settings that name columns name ``schema``'s, and a key to enforce exists."""
    out = normalize(props)
    parsed = TableProperties.parse(out)
    if parsed.primary_key_enforce and not primary_key:
        raise InvalidInputError(f"{PRIMARY_KEY_ENFORCE}=true needs a primary key, and the table has none")
    unknown = [c for c in parsed.bloom_filter_columns if c not in schema.names]
    if unknown:
        raise InvalidInputError(f"{BLOOM_FILTER_COLUMNS} names columns the schema lacks: {unknown}")
    if parsed.ingest_op_column in schema.names:
        raise InvalidInputError(
            f"{INGEST_OP_COLUMN} names {parsed.ingest_op_column!r}, a column of the table: the operation "
            "column is one the landed files carry beside the table's"
        )
    return out
