"""Move a per-table deployment's table settings into the tables: ``python -m infra.migrate
castable.json <bucket> [--dry-run]``.

The per-table deployment listed its tables in ``castable.json`` with their schedule, retention
and ingest settings; the fixed-size one reads those from each table's properties. This sets, on
every table and database member the file lists, the properties its entry gives (nothing for a
setting the entry leaves at its default), then rewrites the file without ``tables`` and
``databases``, carrying their ingest concurrency and memory over as the deployment's. A table
the file lists that the bucket does not hold is reported and left out; the file is then kept
as it was, so the migration can be run again once the table exists. Run it again at will: a
property already set is set to the same value.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import castable
from castable.deployment.layout import table_path
from castable.format.properties import (
    INGEST_MODE,
    INGEST_OP_COLUMN,
    INGEST_SCHEMA_MODE,
    MAINTENANCE_SCHEDULE,
    ORPHAN_GRACE_SECONDS,
    RETAIN_SECONDS,
    RETAIN_VERSIONS,
)

HOUR = 3600


def _seconds(hours: object) -> str:
    return str(round(float(str(hours)) * HOUR))


SETTINGS: dict[str, tuple[str, Callable[[object], str]]] = {
    "schedule": (MAINTENANCE_SCHEDULE, str),
    "ingest_mode": (INGEST_MODE, str),
    "schema_mode": (INGEST_SCHEMA_MODE, str),
    "op_column": (INGEST_OP_COLUMN, str),
    "retain_versions": (RETAIN_VERSIONS, str),
    "retain_hours": (RETAIN_SECONDS, _seconds),
    "grace_hours": (ORPHAN_GRACE_SECONDS, _seconds),
}
"""A per-table entry's keys and the table properties they become."""
DEPLOYMENT_WIDE = ("ingest_concurrency", "ingest_memory_mb")
DEFAULT_SCHEDULE = "rate(6 hours)"
"""The per-table deployment's default schedule, which was also the table property's default."""


class MigrationError(ValueError):
    """The file is not a per-table deployment's configuration."""


@dataclass(frozen=True)
class Change:
    """The properties set on the table at ``uri`` (``None``: the bucket holds no such table)."""

    key: str
    uri: str
    properties: dict[str, str] | None


def properties_of(entry: Mapping[str, Any]) -> dict[str, str]:
    """The table properties a per-table entry's settings give."""
    unknown = sorted(set(entry) - set(SETTINGS) - {"name", *DEPLOYMENT_WIDE})
    if unknown:
        raise MigrationError(f"table {entry.get('name')!r}: unknown key {unknown[0]!r}")
    found = {name: convert(entry[key]) for key, (name, convert) in SETTINGS.items() if entry.get(key) is not None}
    if entry.get("schedule") is None:
        found[MAINTENANCE_SCHEDULE] = DEFAULT_SCHEDULE  # the per-table deployment maintained every listed table
    return found


def entries(doc: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """(key, path in the bucket, entry) of every table and database member the file lists."""
    listed = [(str(t["name"]), t) for t in doc.get("tables", [])]
    for database in doc.get("databases", []):
        listed += [(f"{database['name']}/{member['name']}", member) for member in database.get("tables", [])]
    found = []
    for key, entry in listed:
        try:
            found.append((key, table_path(key), entry))
        except castable.InvalidInputError as e:
            raise MigrationError(str(e)) from None
    return found


def migrate(doc: Mapping[str, Any], bucket: str, *, dry_run: bool = False) -> tuple[list[Change], dict[str, Any]]:
    """Set each listed table's properties (unless ``dry_run``); the changes and the new file."""
    if not isinstance(doc.get("tables", []), list) or not isinstance(doc.get("databases", []), list):
        raise MigrationError("tables and databases must be lists")
    changes = []
    for key, path, entry in entries(doc):
        uri = f"s3://{bucket}/{path}"
        wanted = properties_of(entry)
        try:
            table = castable.open_table(uri)
        except castable.TableNotFoundError:
            changes.append(Change(key, uri, None))
            continue
        if not dry_run and any(table.properties.get(k) != v for k, v in wanted.items()):
            table.set_properties(wanted)
        changes.append(Change(key, uri, wanted))
    listed = [*doc.get("tables", []), *doc.get("databases", [])]
    rest = {k: v for k, v in doc.items() if k not in ("tables", "databases")}
    concurrency = sum(int(e.get("ingest_concurrency", 2)) for e in listed)
    memory = max([int(e.get("ingest_memory_mb", 1024)) for e in listed], default=1024)
    rest.setdefault("ingest_concurrency", min(1000, max(2, concurrency)))
    rest.setdefault("ingest_memory_mb", memory)
    return changes, rest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.migrate", description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path, help="the per-table deployment's castable.json")
    parser.add_argument("bucket", help="the deployment's table bucket (its TablesBucket output)")
    parser.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")
    args = parser.parse_args(argv)
    doc = json.loads(args.config.read_text())
    if "tables" not in doc and "databases" not in doc:
        print(f"{args.config} lists no tables: nothing to migrate")
        return 0
    changes, rest = migrate(doc, args.bucket, dry_run=args.dry_run)
    for change in changes:
        if change.properties is None:
            print(f"{change.key}: no table at {change.uri}: left out")
        else:
            settings = ", ".join(f"{k}={v}" for k, v in sorted(change.properties.items()))
            print(f"{change.key}: {'would set' if args.dry_run else 'set'} {settings}")
    missing = [c.key for c in changes if c.properties is None]
    if missing or args.dry_run:
        print(f"{args.config} left as it was" + (f": {len(missing)} table(s) missing" if missing else ""))
        return 1 if missing else 0
    args.config.write_text(json.dumps(rest, indent=2) + "\n")
    print(f"{args.config} rewritten without its tables: {json.dumps(rest)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
