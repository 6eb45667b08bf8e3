"""castable: ACID tables on S3 (or a local directory) with no catalog and no lock service.

>>> import castable, pyarrow as pa
>>> t = castable.create_table("/tmp/events", pa.schema([("id", pa.int64())]), primary_key="id")
>>> t.append(pa.table({"id": [1, 2, 3]}))
1
>>> t.delete("id = 2")
2
>>> t.scan().to_arrow().column("id").to_pylist()
[1, 3]
"""

from castable.commit.written import WriteResult
from castable.database import Database, DatabaseSnapshot, Transaction, create_database, open_database
from castable.errors import (
    CastableError,
    CommitConflictError,
    CommitStateUnknownError,
    CorruptObjectError,
    DatabaseAlreadyExistsError,
    DatabaseNotFoundError,
    EmptyWriteError,
    FileMismatchError,
    InvalidInputError,
    InvalidPredicateError,
    ObjectLockedError,
    SchemaMismatchError,
    TableAlreadyExistsError,
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
    "EmptyWriteError",
    "FileMismatchError",
    "HistoryEntry",
    "InvalidInputError",
    "InvalidPredicateError",
    "MergeBuilder",
    "ObjectLockedError",
    "Scan",
    "ScanTask",
    "SchemaMismatchError",
    "StoreError",
    "StoreUnavailableError",
    "Table",
    "TableAlreadyExistsError",
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
