"""castable: ACID tables on S3 (or a local directory) with no catalog and no lock service.

>>> import castable, pyarrow as pa
>>> t = castable.create_table("/tmp/events", pa.schema([("id", pa.int64())]), primary_key="id")
>>> t.append(pa.table({"id": [1, 2, 3]})).rows_added
3
>>> t.delete("id = 2").version
2
>>> t.scan().to_arrow().column("id").to_pylist()
[1, 3]
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from castable.commit.written import WriteResult
    from castable.database import Database, DatabaseSnapshot, Transaction, create_database, open_database
    from castable.errors import (
        CastableError,
        CommitConflictError,
        CommitStateUnknownError,
        CorruptObjectError,
        DatabaseAlreadyExistsError,
        DatabaseNotFoundError,
        DuplicateKeyError,
        EmptyWriteError,
        FileMismatchError,
        InvalidInputError,
        InvalidPredicateError,
        ObjectLockedError,
        OutsideStoreError,
        SchemaMismatchError,
        TableAlreadyExistsError,
        TableDroppedError,
        TableNotFoundError,
        TransactionClosedError,
        UnsafeStoreError,
        VersionNotFoundError,
    )
    from castable.maintenance.history import HistoryEntry
    from castable.ops.batching import BatchWriter
    from castable.ops.merge import MergeBuilder
    from castable.read.changes import ChangeScan, ChangeTask
    from castable.read.scan import Scan, ScanTask
    from castable.store.cache import clear_caches
    from castable.store.errors import StoreError, StoreUnavailableError
    from castable.table import Table
    from castable.tables import create_table, open_table

_EXPORTS = {
    "BatchWriter": "castable.ops.batching",
    "CastableError": "castable.errors",
    "ChangeScan": "castable.read.changes",
    "ChangeTask": "castable.read.changes",
    "CommitConflictError": "castable.errors",
    "CommitStateUnknownError": "castable.errors",
    "CorruptObjectError": "castable.errors",
    "Database": "castable.database",
    "DatabaseAlreadyExistsError": "castable.errors",
    "DatabaseNotFoundError": "castable.errors",
    "DatabaseSnapshot": "castable.database",
    "DuplicateKeyError": "castable.errors",
    "EmptyWriteError": "castable.errors",
    "FileMismatchError": "castable.errors",
    "HistoryEntry": "castable.maintenance.history",
    "InvalidInputError": "castable.errors",
    "InvalidPredicateError": "castable.errors",
    "MergeBuilder": "castable.ops.merge",
    "ObjectLockedError": "castable.errors",
    "OutsideStoreError": "castable.errors",
    "Scan": "castable.read.scan",
    "ScanTask": "castable.read.scan",
    "SchemaMismatchError": "castable.errors",
    "StoreError": "castable.store.errors",
    "StoreUnavailableError": "castable.store.errors",
    "Table": "castable.table",
    "TableAlreadyExistsError": "castable.errors",
    "TableDroppedError": "castable.errors",
    "TableNotFoundError": "castable.errors",
    "Transaction": "castable.database",
    "TransactionClosedError": "castable.errors",
    "UnsafeStoreError": "castable.errors",
    "VersionNotFoundError": "castable.errors",
    "WriteResult": "castable.commit.written",
    "clear_caches": "castable.store.cache",
    "create_database": "castable.database",
    "create_table": "castable.tables",
    "open_database": "castable.database",
    "open_table": "castable.tables",
}
"""Each public name and the module it is defined in: importing ``castable`` imports none of them
(pyarrow, the store, the commit protocol), so ``castable --version`` and a script that needs
only an error class start at once; the first use of a name imports its module (PEP 562)."""

if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute

    def __getattr__(name: str) -> Any:
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module 'castable' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted([*globals(), *_EXPORTS])


__version__ = "0.1.0"

__all__ = [
    "BatchWriter",
    "CastableError",
    "ChangeScan",
    "ChangeTask",
    "CommitConflictError",
    "CommitStateUnknownError",
    "CorruptObjectError",
    "Database",
    "DatabaseAlreadyExistsError",
    "DatabaseNotFoundError",
    "DatabaseSnapshot",
    "DuplicateKeyError",
    "EmptyWriteError",
    "FileMismatchError",
    "HistoryEntry",
    "InvalidInputError",
    "InvalidPredicateError",
    "MergeBuilder",
    "ObjectLockedError",
    "OutsideStoreError",
    "Scan",
    "ScanTask",
    "SchemaMismatchError",
    "StoreError",
    "StoreUnavailableError",
    "Table",
    "TableAlreadyExistsError",
    "TableDroppedError",
    "TableNotFoundError",
    "Transaction",
    "TransactionClosedError",
    "UnsafeStoreError",
    "VersionNotFoundError",
    "WriteResult",
    "clear_caches",
    "create_database",
    "create_table",
    "open_database",
    "open_table",
]
