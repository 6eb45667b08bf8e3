"""What a write says it did: :class:`WriteResult`, the version, the commit id and the counts of
rows, files and bytes the commit recorded, read from the committed version's own summary.

A count castable would have to read data for (the live rows a delete by key range or an
upsert's key list removed: that is what keeps them constant-time) is ``None`` and said in words
("not counted"), and is counted on request (``count=True``) from the row counts of the versions
before and after the commit, never guessed."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from castable.commit.change import TRANSACTION
from castable.format.entries import CommitInfo
from castable.format.manifest import Manifest

REWRITES = ("update", "merge")
"""Operations whose changed rows are written again: their own counts say what they did."""
COUNTED = ("rows_added", "rows_inserted", "rows_updated", "rows_deleted", "rows_replaced")
"""The row counts, in the order they are shown."""
_LABELS = {
    "rows_added": "added",
    "rows_inserted": "inserted",
    "rows_updated": "updated",
    "rows_deleted": "deleted",
    "rows_replaced": "replaced",
}


@dataclass(frozen=True)
class WriteResult:
    """What one write committed: ``version`` (the table's version when it committed nothing),
    its ``commit_id``, the ``operation``, and the counts its commit recorded.

    ``committed`` is False when there was nothing to commit (a delete that matched no row);
    ``retried`` is True when the commit id had committed before, so this call committed nothing
    and the counts are those of the first call; ``staged`` is True inside a transaction, whose
    commit makes ``version`` the table's. A row count is ``None`` when it was not counted (see
    :meth:`not_counted`)."""

    version: int
    commit_id: str
    operation: str
    committed: bool = True
    retried: bool = False
    staged: bool = False
    rows_added: int | None = 0
    rows_inserted: int | None = 0
    rows_updated: int | None = 0
    rows_deleted: int | None = 0
    rows_replaced: int | None = 0
    """Live rows an upsert or overwrite removed for the rows it wrote. Over every write, the
    live rows after are those before plus ``rows_added`` less ``rows_deleted`` and
    ``rows_replaced`` (a merge's ``rows_added`` are its inserts; an update adds none)."""
    files_added: int = 0
    files_removed: int = 0
    bytes_added: int = 0
    summary: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The commit's own summary, as the manifest records it (the schema changes of an alter,
    the version a restore brought back, ...)."""

    @classmethod
    def of(cls, manifest: Manifest, *, retried: bool = False, staged: bool = False) -> WriteResult:
        """The result the commit of ``manifest`` recorded (inside a transaction, its last change's)."""
        return cls.from_commit(manifest.version, manifest.commit, retried=retried, staged=staged)

    @classmethod
    def from_commit(
        cls, version: int, commit: CommitInfo, *, retried: bool = False, staged: bool = False
    ) -> WriteResult:
        """The result ``commit`` recorded as ``version``: a transaction's, its changes' added
        up (while staged, its last change's alone: the write just made)."""
        summary: dict[str, Any] = commit.summary
        if commit.operation == TRANSACTION:
            changes = [CommitInfo(op["operation"], commit.commit_id, op) for op in summary["operations"]]
            if staged:
                return cls.from_commit(version, changes[-1], staged=True)
            parts = [cls.from_commit(version, change) for change in changes]
            return cls(
                version,
                commit.commit_id,
                TRANSACTION,
                retried=retried,
                rows_added=_total(p.rows_added for p in parts),
                rows_inserted=_total(p.rows_inserted for p in parts),
                rows_updated=_total(p.rows_updated for p in parts),
                rows_deleted=_total(p.rows_deleted for p in parts),
                rows_replaced=_total(p.rows_replaced for p in parts),
                files_added=sum(p.files_added for p in parts),
                files_removed=sum(p.files_removed for p in parts),
                bytes_added=sum(p.bytes_added for p in parts),
                summary=summary,
            )
        operation = commit.operation

        def count(name: str) -> int | None:
            value = summary.get(name, 0)
            return None if value is None else int(value)

        added, replaced = count("rows_added") or 0, count("rows_replaced")
        inserted = count("rows_inserted")
        deleted = count("rows_removed" if "rows_removed" in summary else "rows_deleted")  # engines': whole files
        if operation == "upsert":
            inserted = None if replaced is None else added - replaced
        elif operation in REWRITES:  # the rows they write anew replace themselves: only inserts add
            added, replaced = inserted or 0, 0
        return cls(
            version,
            commit.commit_id,
            operation,
            retried=retried,
            staged=staged,
            rows_added=added,
            rows_inserted=inserted,
            rows_updated=count("rows_updated"),
            rows_deleted=deleted,
            rows_replaced=replaced,
            files_added=count("files_added") or 0,
            files_removed=count("files_removed") or 0,
            bytes_added=count("bytes_added") or 0,
            summary=summary,
        )

    @classmethod
    def unknown(cls, version: int, commit_id: str, operation: str) -> WriteResult:
        """A retried write whose version has expired since: its counts are gone with it."""
        return cls(
            version,
            commit_id,
            operation,
            retried=True,
            rows_added=None,
            rows_inserted=None,
            rows_updated=None,
            rows_deleted=None,
            rows_replaced=None,
        )

    def not_counted(self) -> list[str]:
        """The row counts left uncounted: a delete by primary key (a range or a list of keys)
        writes a tombstone without reading which of those keys are live, so how many rows it
        removed is known only by counting (``count=True``)."""
        return [name for name in COUNTED if getattr(self, name) is None]

    def counted(self, before: int, after: int) -> WriteResult:
        """This result with its uncounted row counts filled from the live rows of the version
        before the commit (``before``) and of the committed one (``after``): whatever the commit
        did not add, it removed."""
        removed = (self.rows_added or 0) - (after - before)
        deleted = removed if self.rows_deleted is None else self.rows_deleted
        replaced = removed if self.rows_replaced is None else self.rows_replaced
        inserted = (self.rows_added or 0) - replaced if self.rows_inserted is None else self.rows_inserted
        return replace(self, rows_deleted=deleted, rows_replaced=replaced, rows_inserted=inserted)

    def to_dict(self) -> dict[str, Any]:
        """Every field, and ``not_counted``: for JSON."""
        return {**asdict(self), "summary": dict(self.summary), "not_counted": self.not_counted()}

    def __str__(self) -> str:
        if self.retried:
            head = (
                f"commit id {self.commit_id!r} had already committed as version {self.version}; nothing new was written"
            )
        elif not self.committed:
            why = "no row matched" if self.operation in _MATCHING else "nothing to change"
            return f"{self.operation}: {why}; nothing committed, the table stays at version {self.version}"
        else:
            verb = "staged in the transaction as" if self.staged else "committed"
            head = f"{self.operation} {verb} version {self.version}"
        described = self.described()
        hint = " (count=True counts them)" if self.not_counted() and not self.retried else ""
        return head + (": " + described if described else "") + hint

    def described(self) -> str:
        """What the write did in words: its counts ("50 rows added, 1 file added, 1.4 KiB
        written"), else what its summary says for people ("changes: add note string")."""
        parts = [f"{many(value, 'row')} {_LABELS[name]}" for name in COUNTED if (value := getattr(self, name))]
        parts += [f"rows {_LABELS[name]}: not counted (written by key, no row read)" for name in self.not_counted()]
        for name, label in (("files_added", "added"), ("files_removed", "removed")):
            if value := getattr(self, name):
                parts.append(f"{many(value, 'file')} {label}")
        if self.bytes_added:
            parts.append(f"{_size(self.bytes_added)} written")
        if parts:
            return ", ".join(parts)
        said = {k: v for k, v in self.summary.items() if k not in _INTERNAL and v not in (None, [], {})}
        return "; ".join(f"{k.replace('_', ' ')}: {_words(v)}" for k, v in said.items())


_MATCHING = frozenset({"delete", "update", "merge"})
"""Writes that commit nothing when no row matches them."""
_INTERNAL = frozenset(
    {
        *COUNTED,
        "files_added",
        "files_removed",
        "bytes_added",
        "tombstone",
        "replans",
        "registered",
        "carries_rows",
        "files_with_tombstones",
        "operations",
    }
)
"""Summary entries the counts say already, or for castable's own use (an object's path, a
retry count), not for people."""


def _words(value: object) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value))
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def _total(counts: Iterable[int | None]) -> int | None:
    """The sum of ``counts``, unknown if any is."""
    total = 0
    for n in counts:
        if n is None:
            return None
        total += n
    return total


def many(n: int, what: str) -> str:
    """``n`` things in words: "1 row", "2,000 rows"."""
    return f"{n:,} {what}" + ("" if n == 1 else "s")


def _size(n: int) -> str:
    """``n`` bytes for people: B, KiB, MiB or GiB."""
    if n < 1024:
        return f"{n:,} B"
    exponent = min(3, (n.bit_length() - 1) // 10)
    return f"{n / 1024**exponent:,.1f} {('KiB', 'MiB', 'GiB')[exponent - 1]}"
