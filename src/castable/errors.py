"""Exceptions raised by castable: one class per situation a caller can act on."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class CastableError(Exception):
    """Base class of every error castable raises on purpose."""


class TableNotFoundError(CastableError):
    """No table exists at the given location."""


class TableDroppedError(TableNotFoundError):
    """The table at the location was dropped from its catalog with its files kept
    (docs/format.md section 9, ``castable.dropped``): it is no table until it is registered
    again (the catalog's ``register``) or purged."""


class TableAlreadyExistsError(CastableError):
    """``create_table`` found a table already at the location."""


class VersionNotFoundError(CastableError):
    """The requested version (or point in time) is not, or no longer, in the table's history."""


class SchemaMismatchError(CastableError, ValueError):
    """Written data does not match the table schema."""


class InvalidPredicateError(CastableError, ValueError):
    """A filter or delete predicate cannot be parsed or names unknown columns."""


class EmptyWriteError(CastableError, ValueError):
    """An append was given no rows; nothing was committed."""


class InvalidInputError(CastableError, ValueError):
    """An argument is malformed (bad URI, bad property, unsupported data type, ...)."""


class DuplicateKeyError(InvalidInputError):
    """A write to a table that enforces its primary key (``write.primary-key.enforce``) brought
    keys already live, or repeated among its rows: nothing was committed. ``keys`` holds them
    (at most 100)."""

    def __init__(self, message: str, keys: list[object]) -> None:
        super().__init__(message)
        self.keys = keys


class FileMismatchError(InvalidInputError):
    """A file to register disagrees with its description (rows, row groups or statistics, as
    its Parquet footer has them): the whole registration is refused and nothing committed."""


class CorruptObjectError(CastableError):
    """An object of the table (pointer, manifest, tombstone, data file) is malformed or changed."""


class UnsupportedFileError(CastableError):
    """A data file holds values castable cannot rewrite without changing them (erase refuses it)."""


class CommitConflictError(CastableError):
    """A commit kept losing to concurrent writers until its retries ran out; nothing was committed."""


class CommitStateUnknownError(CastableError):
    """The store failed in a way that leaves unknown whether the commit landed.

    Retry with the same ``commit_id``: a commit that did land is recognised and not repeated.
    """

    def __init__(self, message: str, commit_id: str) -> None:
        super().__init__(message)
        self.commit_id = commit_id


class OutsideStoreError(InvalidInputError):
    """An object of a local store resolves, through a symbolic link, outside the folder the store
    may reach (its table's, or the warehouse of the catalog that opened it): castable reads,
    writes and deletes nothing there."""


class UnsafeStoreError(CastableError):
    """The store does not honour the conditional writes the commit protocol relies on.

    Concurrent writers on such a store would silently lose commits, so castable refuses to
    write unless the table is opened in single-writer mode (storage option ``single_writer``).
    """


class DatabaseNotFoundError(CastableError):
    """No database exists at the given location."""


class DatabaseAlreadyExistsError(CastableError):
    """``create_database`` found a database (or a table) already at the location."""


class TransactionClosedError(CastableError):
    """A transaction was used before it began or after it committed or was aborted."""


class ObjectLockedError(CastableError):
    """The bucket has S3 Object Lock, which keeps object versions until their retention ends: an
    erasure could not remove the erased rows, so erase is refused before anything is written."""


def columns_hint(names: str | Iterable[str], known: Iterable[str]) -> str:
    """What a refusal of unknown column ``names`` adds: the nearest known names, then all of
    them: ``(did you mean 'carrier'? columns: carrier, flight, time_hour)``."""
    known = list(known)
    wanted = [names] if isinstance(names, str) else list(names)
    guesses = dict.fromkeys(g for n in wanted for g in difflib.get_close_matches(n, known, n=1, cutoff=0.6))
    asked = f"did you mean {' or '.join(map(repr, guesses))}? " if guesses else ""
    return f"({asked}columns: {', '.join(known)})"
