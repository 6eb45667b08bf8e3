"""Register published Iceberg metadata in the AWS Glue Data Catalog, where Athena, Redshift
Spectrum, EMR and Snowflake find tables: an Iceberg table (``table_type=ICEBERG``) whose
``metadata_location`` names the newest publication (docs/iceberg.md, "Glue").

The table is created on first registration and moved only forward after it: a registration
naming a version older than the one Glue holds changes nothing, so registrations racing from
several processes leave the newest. Each update names the Glue table version it read
(``VersionId``), so Glue refuses one that lost a race, which then reads again. Updates skip
Glue's table-version archive: a table updated on every commit would otherwise use up the
account's quota of table versions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pyiceberg.schema import Schema
from pyiceberg.serializers import FromInputFile
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from castable.iceberg.files import StoredFileIO
from castable.iceberg.publication import METADATA
from castable.iceberg.schema import IcebergPublishError
from castable.store import ObjectStore

RACES = 8
"""Glue updates that may lose a race to another registration before one gives up."""
_HIVE_TYPES: dict[type[IcebergType], str] = {
    BooleanType: "boolean",
    IntegerType: "int",
    LongType: "bigint",
    FloatType: "float",
    DoubleType: "double",
    DateType: "date",
    TimeType: "string",
    TimestampType: "timestamp",
    TimestamptzType: "timestamp",
    StringType: "string",
    UUIDType: "string",
    FixedType: "binary",
    BinaryType: "binary",
}
_METADATA_FILE = re.compile(r"/v(\d+)\.metadata\.json$")


@dataclass(frozen=True)
class GlueRegistration:
    """What one registration found and did."""

    database: str
    name: str
    metadata_location: str
    """The location Glue holds now."""
    changed: bool
    """Whether this registration created or moved the Glue table."""


def register(store: ObjectStore, metadata_location: str, *, database: str, name: str, glue: Any) -> GlueRegistration:
    """Make Glue table ``database.name`` the Iceberg table whose metadata is at
    ``metadata_location`` (a publication of the table at ``store``), unless it names a newer
    publication already. ``glue`` is a boto3 Glue client. ``IcebergPublishError`` if a Glue
    table of that name is another table's."""
    version = _version_of(metadata_location)
    metadata = FromInputFile.table_metadata(StoredFileIO(store).new_input(metadata_location))
    parameters = {"table_type": "ICEBERG", "metadata_location": metadata_location}
    table_input: dict[str, Any] = {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": parameters,
        "StorageDescriptor": {"Location": metadata.location, "Columns": columns(metadata.schema())},
    }
    for _ in range(RACES):
        try:
            held = glue.get_table(DatabaseName=database, Name=name)["Table"]
        except glue.exceptions.EntityNotFoundException:
            try:
                glue.create_table(DatabaseName=database, TableInput=table_input)
            except glue.exceptions.AlreadyExistsException:
                continue
            return GlueRegistration(database, name, metadata_location, True)
        current = held.get("Parameters", {}).get("metadata_location", "")
        where = held.get("StorageDescriptor", {}).get("Location")
        if where != metadata.location:
            raise IcebergPublishError(f"Glue table {database}.{name} is another table's (at {where})")
        if current and _version_of(current) >= version:
            return GlueRegistration(database, name, current, False)
        if current:
            parameters["previous_metadata_location"] = current
        try:
            glue.update_table(
                DatabaseName=database, TableInput=table_input, VersionId=held["VersionId"], SkipArchive=True
            )
        except glue.exceptions.ConcurrentModificationException:
            continue
        return GlueRegistration(database, name, metadata_location, True)
    raise IcebergPublishError(f"Glue table {database}.{name} kept changing under {RACES} registrations")


def columns(schema: Schema) -> list[dict[str, Any]]:
    """The schema's columns as Glue lists them (Hive types, with the Iceberg field ids)."""
    return [
        {
            "Name": f.name,
            "Type": _hive_type(f.field_type),
            "Parameters": {"iceberg.field.id": str(f.field_id), "iceberg.field.optional": str(f.optional).lower()},
        }
        for f in schema.fields
    ]


def _hive_type(t: IcebergType) -> str:
    if isinstance(t, DecimalType):
        return f"decimal({t.precision},{t.scale})"
    return _HIVE_TYPES[type(t)]


def _version_of(location: str) -> int:
    """The version a castable publication's metadata location names (``.../v<K>.metadata.json``)."""
    found = _METADATA_FILE.search(location)
    if found is None or f"/{METADATA}" not in location:
        raise IcebergPublishError(f"{location} is no castable publication's metadata file")
    return int(found.group(1))
