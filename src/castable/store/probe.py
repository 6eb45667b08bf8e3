"""Check that a store honours the conditional writes the commit protocol stands on (docs/format.md section 7).

Some S3-compatible servers accept ``If-None-Match`` and ``If-Match`` and ignore them: every
racing writer "wins", commits vanish and deleted rows come back. Others need the ETag in
``If-Match`` without its quotes. A probe of four PUTs on a scratch key under the table tells
which, before anything of the table is written.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

from castable.store.base import ObjectStore
from castable.store.errors import PreconditionFailedError, StoreError, StoreUnavailableError

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
    clean: bool = True
    """Every PUT of the probe got an answer (a 200 or a 412): no verdict rests on an error, which
    a client cannot tell from an answer the network lost."""

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


class _Answers:
    """The probe's PUTs and how the store answered each. Only a 412 is a refusal a writer can
    rely on; another error the store answered (Ceph answers some stale ``If-Match`` PUTs with
    500) cannot be told from a PUT that landed. No answer at all (the connection failed on every
    retry of the SDK) says nothing about the store and marks the probe unclean."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self.clean = True

    def answer(self, key: str, data: bytes, **condition: object) -> Literal["written", "refused", "error"]:
        """``"written"``, ``"refused"`` (412) or ``"error"``."""
        try:
            self.store.put(key, data, **condition)  # type: ignore[arg-type]
        except PreconditionFailedError:
            return "refused"
        except StoreUnavailableError:
            self.clean = False
            return "error"
        except StoreError:
            return "error"
        return "written"


def probe_conditional_writes(store: ObjectStore) -> ConditionalWrites:
    """Run the probe once on a fresh scratch key and delete it; raises ``StoreError`` if the
    store cannot be written at all.

    The stale ETag is sent in the form the store took the current one in (quoted, or bare as
    Ceph radosgw wants it), since a store that refuses every quoted ETag would pass a quoted
    stale check and still ignore the bare one castable then sends; only a 412 counts as honoured.
    """
    key = f"{PROBE_PREFIX}{uuid.uuid4().hex}"
    store.put(key, b"0", if_none_match=True)
    answers = _Answers(store)
    try:
        if_none_match = answers.answer(key, b"1", if_none_match=True) == "refused"
        current = store.head(key).etag.strip('"')
        if_match_quoted = answers.answer(key, b"2", if_match=f'"{current}"') == "written"
        if_match_unquoted = if_match_quoted or answers.answer(key, b"3", if_match=current) == "written"
        stale = _STALE_ETAG if if_match_quoted or not if_match_unquoted else _STALE_ETAG.strip('"')
        if_match_stale = answers.answer(key, b"4", if_match=stale) == "refused"
    finally:
        store.delete(key)
    return ConditionalWrites(if_none_match, if_match_stale, if_match_quoted, if_match_unquoted, answers.clean)


PROBES = 4
"""Probes run at most to reach a verdict (see :func:`settle_conditional_writes`)."""


def settle_conditional_writes(store: ObjectStore) -> ConditionalWrites:
    """The store's verdict, from clean probes only: safe as soon as one clean probe shows it,
    unsafe only when two clean probes (fresh keys, every answer received) show it. A probe
    that met an error says nothing either way. ``StoreUnavailableError`` if no verdict could be reached in
    ``PROBES`` probes: nothing is concluded, and the caller must not remember an answer."""
    unsafe = None
    for _ in range(PROBES):
        found = probe_conditional_writes(store)
        if not found.clean:
            continue
        if found.safe or unsafe is not None:
            return found
        unsafe = found
    raise StoreUnavailableError(
        f"{store.uri}: could not tell whether the store honours conditional writes: {PROBES} probes "
        "met errors (lost answers or failed requests), so no verdict was formed; try again"
    )
