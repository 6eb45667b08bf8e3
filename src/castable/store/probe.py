"""Check that a store honours the conditional writes the commit protocol stands on (docs/format.md section 7).

Some S3-compatible servers accept ``If-None-Match`` and ``If-Match`` and ignore them: every
racing writer "wins", commits vanish and deleted rows come back. Others need the ETag in
``If-Match`` without its quotes. A probe of four PUTs on a scratch key under the table tells
which, before anything of the table is written.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from castable.store.base import ObjectStore
from castable.store.errors import PreconditionFailedError, StoreError

PROBE_PREFIX = "_castable_probe/"
"""Scratch keys of the probe (deleted at once; ``gc`` sweeps any a crash left behind)."""
_STALE_ETAG = '"00000000000000000000000000000000"'


@dataclass(frozen=True)
class ConditionalWrites:
    """What a store did with each conditional write of the probe."""

    if_none_match: bool
    """A PUT with ``If-None-Match: *`` on an existing key was refused (412)."""
    if_match_stale: bool
    """A PUT with ``If-Match`` and a wrong ETag was refused (412)."""
    if_match_quoted: bool
    """A PUT with ``If-Match`` and the current ETag as the store returned it (quoted) succeeded."""
    if_match_unquoted: bool
    """Same, with the ETag's quotes removed (some stores, Ceph radosgw among them, need this)."""

    @property
    def safe(self) -> bool:
        return self.if_none_match and self.if_match_stale and (self.if_match_quoted or self.if_match_unquoted)

    def problems(self) -> list[str]:
        """What the store does not honour, in words."""
        found = []
        if not self.if_none_match:
            found.append("If-None-Match: * did not stop a PUT over an existing object")
        if not self.if_match_stale:
            found.append("If-Match with a stale ETag did not stop a PUT")
        if not (self.if_match_quoted or self.if_match_unquoted):
            found.append("If-Match with the object's current ETag was refused")
        return found


def _answer(store: ObjectStore, key: str, data: bytes, **condition: object) -> bool | None:
    """How the store answered a conditional PUT: ``True`` written, ``None`` refused with 412,
    ``False`` any other error (which a client cannot tell from a lost network answer)."""
    try:
        store.put(key, data, **condition)  # type: ignore[arg-type]
    except PreconditionFailedError:
        return None
    except StoreError:
        return False
    return True


def probe_conditional_writes(store: ObjectStore) -> ConditionalWrites:
    """Run the probe on a fresh scratch key and delete it; raises ``StoreError`` if the store
    cannot be written at all.

    The stale ETag is sent in the form the store took the current one in (quoted, or bare as
    Ceph radosgw wants it), since a store that refuses every quoted ETag would pass a quoted
    stale check and still ignore the bare one castable then sends; only a 412 counts as honoured.
    """
    key = f"{PROBE_PREFIX}{uuid.uuid4().hex}"
    store.put(key, b"0", if_none_match=True)
    try:
        if_none_match = _answer(store, key, b"1", if_none_match=True) is None
        current = store.head(key).etag.strip('"')
        if_match_quoted = _answer(store, key, b"2", if_match=f'"{current}"') is True
        if_match_unquoted = if_match_quoted or _answer(store, key, b"3", if_match=current) is True
        stale = _STALE_ETAG if if_match_quoted or not if_match_unquoted else _STALE_ETAG.strip('"')
        if_match_stale = _answer(store, key, b"4", if_match=stale) is None
    finally:
        store.delete(key)
    return ConditionalWrites(if_none_match, if_match_stale, if_match_quoted, if_match_unquoted)
