"""Where each object of a table lives under its root (docs/format.md section 1)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

POINTER_KEY = "_latest_manifest"
MANIFEST_PREFIX = "manifest/"
DATA_PREFIX = "data/"
FILE_LISTS_PREFIX = f"{DATA_PREFIX}_file_lists/"
"""Where a writer in another process (a Spark job) leaves the entries of the files one commit
registers, for a committer elsewhere (the commit function) to read: any number of files, and
their statistics computed where they were written. Unreferenced, so gc removes them later."""
TOMBSTONE_PREFIX = "tombstone/"
ERASURE_PREFIX = "erasure/"
"""An erasure's search targets (the erased rows), kept from before its purge deletes anything
until the purge has verified it (docs/format.md section 11)."""
ERASURE_PLAN_PREFIX = f"{ERASURE_PREFIX}plans/"
"""Where an erasure in steps keeps the files it plans to splice (docs/format.md section 11)."""
RECEIPT_PREFIX = "receipts/"
"""Erasure receipts (docs/format.md section 11): what an erasure did and proved, kept with the
table; they hold no row value (the predicate only as a hash), so they are not among the objects
an erasure searches."""
ICEBERG_PREFIX = "metadata/"
"""Iceberg metadata published for other engines (``castable.iceberg``): derived from castable's
versions, never read by castable, and removed whole by a purge (its manifests hold column
bounds and its inline files rows; the next publication writes it again)."""
ICEBERG_HINT = f"{ICEBERG_PREFIX}version-hint.text"
"""Names the newest published Iceberg version; its presence says the table publishes."""
DROPPED_KEY = "_dropped"
"""Present while the table is dropped with its files kept (docs/format.md section 1): a listing's
hint, beside the ``castable.dropped`` property that readers go by."""
MAINTENANCE_PLAN_PREFIX = "maintenance/plans/"
"""Where a maintenance run keeps the groups of files it plans to compact."""
_VERSION_DIGITS = 20


def manifest_key(version: int) -> str:
    """``manifest/v<20-digit version>.json``: zero-padded so keys sort by version."""
    return f"{MANIFEST_PREFIX}v{version:0{_VERSION_DIGITS}d}.json"


def version_of_manifest_key(key: str) -> int | None:
    name = key.removeprefix(MANIFEST_PREFIX)
    if not (name.startswith("v") and name.endswith(".json")):
        return None
    digits = name[1:-5]
    return int(digits) if digits.isdigit() else None


def _hour_path(now: datetime | None) -> str:
    return (now or datetime.now(UTC)).strftime("%Y/%m/%d/%H")


def new_data_key(now: datetime | None = None, folder: str = "") -> str:
    """A new data file's key: ``data/[<folder>/]YYYY/MM/DD/HH/<uuid>.parquet``, where ``folder`` is
    the partition path of the file's rows (``PartitionSpec.path``), so a partition's files list together."""
    inside = f"{folder}/" if folder else ""
    return f"{DATA_PREFIX}{inside}{_hour_path(now)}/{uuid.uuid4()}.parquet"


def partition_folder(key: str) -> str:
    """The partition path a data file's key holds (its folders under ``data/`` that are each
    ``name=value``, as castable and Iceberg's writers name them), or ``""``: where a file written
    in place of this one (an erasure's splice) goes."""
    if not key.startswith(DATA_PREFIX):
        return ""
    folders = key.removeprefix(DATA_PREFIX).split("/")[:-1]
    held = []
    for folder in folders:
        if "=" not in folder:
            break
        held.append(folder)
    return "/".join(held)


def new_tombstone_key(now: datetime | None = None) -> str:
    return f"{TOMBSTONE_PREFIX}{_hour_path(now)}/{uuid.uuid4()}.del"
