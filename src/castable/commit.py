"""The commit protocol (DESIGN section 2).

- The commit point is the ``If-None-Match: *`` PUT of ``manifest/v<N+1>``: exactly one writer
  creates each version, so versions are dense and time travel to version K is one GET.
- ``_latest_manifest`` is an accelerator, moved forward only, by compare-and-swap (If-Match).
  Whoever finds it behind rolls it forward; it is never moved backwards.
- A writer that loses the race loads the winner, lets its change re-validate and rebuild on
  top (rebase), and retries with bounded, jittered exponential backoff.
- Every commit carries a ``commit_id``. A retried commit whose id is already in the table's
  recent history returns that version, and after an ambiguous failure the writer reads the
  version it tried and recognises its own commit.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_attempt
from tenacity.wait import wait_random_exponential

from castable.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    CorruptObjectError,
    TableNotFoundError,
    VersionNotFoundError,
)
from castable.layout import POINTER_KEY, manifest_key
from castable.manifest import CommitInfo, DataFile, Manifest, TombstoneFile
from castable.store import (
    ConcurrentModificationError,
    ObjectNotFoundError,
    ObjectStore,
    PreconditionFailedError,
    StoreError,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NextState:
    """What a change makes of the base it is applied to: the next version's file lists."""

    data_files: tuple[DataFile, ...]
    tombstones: tuple[TombstoneFile, ...]
    summary: dict[str, Any]


@dataclass(frozen=True)
class Pointer:
    """The decoded ``_latest_manifest`` object and the ETag it was read with."""

    version: int
    etag: str


def encode_pointer(version: int) -> bytes:
    return json.dumps({"version": version, "manifest": manifest_key(version)}).encode()


def read_pointer(store: ObjectStore) -> Pointer:
    try:
        blob = store.get(POINTER_KEY)
    except ObjectNotFoundError:
        raise TableNotFoundError(f"no castable table at {store.uri}") from None
    try:
        doc = json.loads(blob.data)
        version = doc["version"]
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise ValueError(f"bad version {version!r}")
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptObjectError(f"{store.uri}/{POINTER_KEY} is malformed: {e!r}") from None
    return Pointer(version=version, etag=blob.etag)


def read_manifest(store: ObjectStore, version: int) -> Manifest:
    """The manifest of ``version``; ``VersionNotFoundError`` if it does not (or no longer) exist."""
    key = manifest_key(version)
    try:
        blob = store.get(key)
    except ObjectNotFoundError:
        raise VersionNotFoundError(f"version {version} does not exist in {store.uri}") from None
    manifest = Manifest.from_json(blob.data, key=key)
    if manifest.version != version:
        raise CorruptObjectError(f"{key} claims to be version {manifest.version}")
    return manifest


def load_latest(store: ObjectStore) -> tuple[Manifest, Pointer]:
    """The newest committed version: the pointer's, then forward while ``v<N+1>`` exists."""
    pointer = read_pointer(store)
    try:
        manifest = read_manifest(store, pointer.version)
    except VersionNotFoundError:
        raise CorruptObjectError(
            f"{store.uri}/{POINTER_KEY} names version {pointer.version}, whose manifest "
            f"{manifest_key(pointer.version)} does not exist"
        ) from None
    while True:
        try:
            manifest = read_manifest(store, manifest.version + 1)
        except VersionNotFoundError:
            return manifest, pointer


def advance_pointer(store: ObjectStore, version: int, etag: str | None) -> str | None:
    """Move the pointer forward to ``version`` (never backwards); return its new ETag.

    The commit has already happened when this runs, so failures are logged, not raised: the
    next writer or reader that finds the pointer behind rolls it forward.
    """
    for _ in range(20):
        try:
            if etag is None:
                current = read_pointer(store)
                if current.version >= version:
                    return current.etag
                etag = current.etag
            return store.put(POINTER_KEY, encode_pointer(version), if_match=etag).etag
        except (PreconditionFailedError, ConcurrentModificationError):
            etag = None
        except (StoreError, CorruptObjectError, TableNotFoundError) as e:
            log.warning("could not advance %s to version %d: %s", POINTER_KEY, version, e)
            return None
    log.warning("gave up advancing %s to version %d under contention", POINTER_KEY, version)
    return None


class _Retry(Exception):
    """Internal: this attempt lost; rebase and try again."""


@dataclass
class CommitResult:
    manifest: Manifest
    pointer_etag: str | None
    already_committed: bool = False


def commit(
    store: ObjectStore,
    base: Manifest,
    *,
    operation: str,
    commit_id: str,
    build: Callable[[Manifest], NextState],
    pointer_etag: str | None = None,
    max_attempts: int = 50,
    commit_retention: int = 1000,
) -> CommitResult:
    """Commit the change that ``build`` applies to a base manifest, rebasing until it lands.

    ``build(base)`` is called again on every newer base: that is where a change re-validates
    itself against what was committed meanwhile (DESIGN section 4), and it may raise to abort.
    """
    state = {"base": base}

    def attempt() -> Manifest | CommitResult:
        current = state["base"]
        if commit_id in current.recent_commits:
            return CommitResult(read_manifest(store, current.recent_commits[commit_id]), pointer_etag, True)
        staged = build(current)
        candidate = current.next(
            commit=CommitInfo(operation, commit_id, staged.summary),
            created_at=now(),
            data_files=staged.data_files,
            tombstones=staged.tombstones,
            commit_retention=commit_retention,
        )
        key = manifest_key(candidate.version)
        try:
            store.put(key, candidate.to_json(), if_none_match=True)
            return candidate
        except PreconditionFailedError:
            pass
        except ConcurrentModificationError:
            raise _Retry() from None
        except StoreError as e:
            log.warning("commit of %s to %s ended ambiguously: %s", commit_id, key, e)
            try:
                store.head(key)
            except ObjectNotFoundError:
                raise _Retry() from None
            except StoreError as e2:
                raise CommitStateUnknownError(
                    f"could not tell whether commit {commit_id} landed as {key}: {e2}", commit_id
                ) from e
        winner = read_manifest(store, candidate.version)
        if winner.commit.commit_id == commit_id:
            return winner
        state["base"] = winner
        raise _Retry()

    retrying = Retrying(
        stop=stop_after_attempt(max_attempts),
        wait=wait_random_exponential(multiplier=0.005, max=0.5),
        retry=retry_if_exception_type(_Retry),
        reraise=False,
    )
    try:
        outcome = retrying(attempt)
    except RetryError:
        raise CommitConflictError(
            f"commit {commit_id} ({operation}) lost to concurrent writers {max_attempts} times"
        ) from None
    if isinstance(outcome, CommitResult):
        return outcome
    return CommitResult(outcome, advance_pointer(store, outcome.version, pointer_etag))


def now() -> datetime:
    return datetime.now(UTC)
