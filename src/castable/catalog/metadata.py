"""What the catalog answers a load with: the Iceberg metadata castable publishes for the
table's newest version (published on demand, O(change)), with the properties clients set.

Iceberg clients' properties are stored as castable table properties; one that falls in a
namespace of castable's settings without being one (``write.delete.mode``) is kept under
``iceberg.`` so castable's validation of its own settings stays strict."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pyiceberg.table.metadata import TableMetadata, TableMetadataV2

from castable.catalog.errors import BadRequestError
from castable.catalog.models import BOUNDED
from castable.format.properties import unknown_setting
from castable.iceberg.publication import NAME_MAPPING, publish_through
from castable.table import Table

WRITE_PATHS = frozenset(
    {"write.data.path", "write.metadata.path", "write.object-storage.path", "write.folder-storage.path"}
)
"""The table properties that tell Iceberg engines where to write files."""
INTERNAL = "castable."
"""The prefix of castable's own properties (its publication's, a drop's): kept out of a client's view."""
KEPT_AS = "iceberg."
"""The prefix of a client's property that would otherwise read as an unknown castable setting."""


def stored_name(name: str) -> str:
    """The castable property a client's property ``name`` is kept as."""
    return f"{KEPT_AS}{name}" if unknown_setting(name) else name


def client_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """A table's properties as Iceberg clients set them."""
    return {k.removeprefix(KEPT_AS) if k.startswith(KEPT_AS) else k: v for k, v in properties.items()}


def published_property(name: str) -> bool:
    """Whether castable's publication sets property ``name`` (the name mapping, ``castable.*``):
    a client's value of it is not kept, since the publication derives it from the table."""
    return name == NAME_MAPPING or name.startswith(INTERNAL)


def stored_properties(properties: Mapping[str, object]) -> dict[str, str]:
    """A client's properties as castable keeps them; ``BadRequestError`` for one that would
    send an engine's writes elsewhere (a castable table's files are under its folder) or that is
    larger than :mod:`castable.catalog.models` allows (a 400 naming it)."""
    bounded = BOUNDED.validate_python({str(k): str(v) for k, v in properties.items()})
    for k in bounded:
        if k in WRITE_PATHS:
            raise BadRequestError(f"{k} is refused: a castable table's files are written under its own folder")
    return {stored_name(k): v for k, v in bounded.items() if not published_property(k)}


def stored_names(names: Iterable[str]) -> list[str]:
    return [stored_name(n) for n in names if not published_property(n)]


def current_metadata(table: Table, previous: TableMetadata | None = None) -> tuple[str, TableMetadata]:
    """The location and metadata of ``table``'s newest version as Iceberg, with its properties;
    ``previous``: the metadata of an earlier version the caller read (its publication need not
    read it again)."""
    published = publish_through(
        table.store,
        table.version,
        table.snapshot,
        previous=previous if isinstance(previous, TableMetadataV2) else None,
    )
    properties = {**client_properties(table.properties), **published.metadata.properties}
    shown = {k: v for k, v in properties.items() if not k.startswith(INTERNAL)}
    return published.location, published.metadata.model_copy(update={"properties": shown})


def load_result(table: Table, *, refs_only: bool = False) -> dict[str, Any]:
    """The body of a LoadTableResult for ``table``; with ``refs_only`` (the spec's
    ``snapshots=refs``), only the snapshots a ref names (``main``'s)."""
    location, metadata = current_metadata(table)
    if refs_only:
        named = {ref.snapshot_id for ref in metadata.refs.values()}
        metadata = metadata.model_copy(update={"snapshots": [s for s in metadata.snapshots if s.snapshot_id in named]})
    return {"metadata-location": location, "metadata": _json(metadata), "config": {}}


def commit_result(table: Table, previous: TableMetadata | None = None) -> dict[str, Any]:
    """The body of a CommitTableResponse for ``table``'s newest version (``previous``: the
    metadata the commit was checked against)."""
    location, metadata = current_metadata(table, previous)
    return {"metadata-location": location, "metadata": _json(metadata)}


def _json(metadata: TableMetadata) -> Any:
    return json.loads(metadata.model_dump_json())
