"""The pointer, ``_latest_manifest`` (docs/format.md section 2): the newest version (an
accelerator, moved forward only by compare-and-swap), the retention floor, and the line of
writers waiting for a turn to commit (section 7, fairness)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from typing import Any

from castable.errors import CommitConflictError, CorruptObjectError, TableNotFoundError
from castable.format.layout import POINTER_KEY, manifest_key
from castable.store import (
    ConcurrentModificationError,
    ObjectNotFoundError,
    ObjectStore,
    PreconditionFailedError,
    StoreError,
)

log = logging.getLogger(__name__)

LINE_LIMIT = 64
"""At most this many writers wait in line: the pointer stays small however many write."""


@dataclass(frozen=True, order=True)
class Turn:
    """A writer waiting in line to commit: one commit of one process. A line is ordered by
    ``waiting_since``, so the writer that has waited longest commits next."""

    waiting_since: float
    """When the commit began, in seconds since the epoch (its own clock)."""
    writer: str
    """A random token, new for each commit."""

    def to_json(self) -> dict[str, Any]:
        return {"writer": self.writer, "waiting_since": self.waiting_since}

    @classmethod
    def from_json(cls, doc: object) -> Turn | None:
        """The turn in ``doc``; ``None`` if it is malformed (a line is advice, never data)."""
        if not isinstance(doc, dict):
            return None
        writer, since = doc.get("writer"), doc.get("waiting_since")
        if not isinstance(writer, str) or isinstance(since, bool) or not isinstance(since, int | float):
            return None
        return cls(float(since), writer)


@dataclass(frozen=True)
class Pointer:
    """The decoded ``_latest_manifest`` object and the ETag it was read with.

    ``oldest`` is the retention floor: ``expire`` raises it before deleting the manifests below
    it, so a writer that committed from a stale base can tell its version landed in an
    expired slot (see ``castable.commit.protocol``). ``line`` holds the writers waiting for a turn,
    oldest first: while it is not empty, only its first writer attempts to commit.
    """

    version: int
    etag: str
    oldest: int = 0
    line: tuple[Turn, ...] = ()

    def without(self, writer: str) -> tuple[Turn, ...]:
        """The line with ``writer`` taken out."""
        return tuple(t for t in self.line if t.writer != writer)

    def holds(self, writer: str) -> bool:
        return any(t.writer == writer for t in self.line)


ABSENT = Pointer(version=0, etag="")
"""Stands for a pointer that does not exist (yet): advancing it creates it with If-None-Match."""


def encode_pointer(version: int, oldest: int = 0, line: tuple[Turn, ...] = ()) -> bytes:
    doc: dict[str, Any] = {"version": version, "manifest": manifest_key(version)}
    if oldest:
        doc["oldest"] = oldest
    if line:
        doc["waiting"] = [t.to_json() for t in line]
    return json.dumps(doc).encode()


def read_pointer(store: ObjectStore) -> Pointer:
    try:
        blob = store.get(POINTER_KEY)
    except ObjectNotFoundError:
        raise TableNotFoundError(f"no castable table at {store.uri}") from None
    try:
        doc = json.loads(blob.data)
        version, oldest = doc["version"], doc.get("oldest", 0)
        for value in (version, oldest):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"bad version {value!r}")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CorruptObjectError(f"{store.uri}/{POINTER_KEY} is malformed: {e!r}") from None
    waiting = doc.get("waiting")
    turns = [Turn.from_json(t) for t in waiting] if isinstance(waiting, list) else []
    line = tuple(sorted(t for t in turns if t is not None))
    return Pointer(version=version, etag=blob.etag, oldest=oldest, line=line)


def put_pointer(store: ObjectStore, current: Pointer, **change: Any) -> Pointer:
    """Write ``current`` with ``change`` applied (fields of :class:`Pointer`), by
    compare-and-swap on the ETag it was read with (create it if it was absent)."""
    target = replace(current, **change)
    condition: dict[str, Any] = {"if_match": current.etag} if current.etag else {"if_none_match": True}
    info = store.put(POINTER_KEY, encode_pointer(target.version, target.oldest, target.line), **condition)
    return replace(target, etag=info.etag)


def retention_floor(store: ObjectStore) -> int:
    """The oldest version readers may see. A manifest below it is an expired slot that a writer
    with a stale base re-created for a moment before finding it invisible and deleting it again,
    so it must never be read as a version of the table. A malformed pointer gives 0: every
    manifest then counts as retained, which keeps more files, never fewer."""
    try:
        return read_pointer(store).oldest
    except TableNotFoundError:  # a create that stopped before its pointer: nothing expired yet
        return 0
    except CorruptObjectError as e:
        log.info("retention floor unknown, taken as 0: %s", e)
        return 0


def advance_pointer(
    store: ObjectStore, version: int, known: Pointer | None, *, leaving: str | None = None
) -> Pointer | None:
    """Move the pointer forward to ``version`` (never backwards); return the pointer as it ends.
    The line is kept, less ``leaving`` (the committing writer, whose turn is done): it is
    taken out even when the pointer is already at or past ``version``.

    The commit has already happened when this runs, so failures are logged, not raised: the
    next writer or reader that finds the pointer behind rolls it forward. A store error on the
    conditional PUT is ambiguous (it may have landed), so the pointer is read again to decide.
    """
    for _ in range(20):
        try:
            try:
                current = known if known is not None else read_pointer(store)
            except TableNotFoundError:
                current = ABSENT
            done = leaving is not None and current.holds(leaving)
            if current.version >= version and not done:
                return current
            line = current.without(leaving) if leaving is not None else current.line
            return put_pointer(store, current, version=max(version, current.version), line=line)
        except (PreconditionFailedError, ConcurrentModificationError):
            known = None
        except StoreError as e:
            log.info("advancing %s to version %d ended ambiguously (%s); reading it again", POINTER_KEY, version, e)
            known = None
        except CorruptObjectError as e:
            log.warning("could not advance %s to version %d: %s", POINTER_KEY, version, e)
            return None
    log.warning("gave up advancing %s to version %d after 20 attempts", POINTER_KEY, version)
    return None


def reset_pointer(store: ObjectStore, version: int, oldest: int) -> None:
    """Repair: move the pointer to ``version`` even when it is malformed or missing (``oldest``
    then stands for the floor it recorded). A readable pointer only moves forward."""
    for _ in range(20):
        try:
            current = read_pointer(store)
        except TableNotFoundError:
            current = ABSENT
        except CorruptObjectError:
            current = Pointer(version=-1, etag=store.head(POINTER_KEY).etag, oldest=oldest)
        if current.version >= version:
            return
        try:
            put_pointer(store, current, version=version)
            return
        except (PreconditionFailedError, ConcurrentModificationError):
            continue
    raise CommitConflictError(f"could not reset {POINTER_KEY} to version {version} under contention")


def raise_floor(store: ObjectStore, oldest: int, version: int) -> Pointer:
    """Record in the pointer that versions below ``oldest`` are being expired (and that the
    newest is at least ``version``). Must succeed before any manifest below it is deleted."""
    for _ in range(50):
        current = read_pointer(store)
        if current.oldest >= oldest and current.version >= version:
            return current
        try:
            return put_pointer(
                store, current, version=max(current.version, version), oldest=max(current.oldest, oldest)
            )
        except (PreconditionFailedError, ConcurrentModificationError, StoreError):
            continue
    raise CommitConflictError(f"could not record the retention floor in {POINTER_KEY} under contention")
