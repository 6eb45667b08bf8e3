"""An anomaly checker for histories of transactions, in the style of Jepsen's Elle (rw-register).

Every write stores a value no other write stores (the writer's transaction id), so each read
says which write it saw and each key's versions are ordered by the database version of the
commits that wrote them. From that the checker builds Adya's direct serialization graph over the
committed transactions and reports:

- ``G1a`` aborted read: a read saw a write of a transaction that did not commit;
- ``lost-update``: a transaction read a key and wrote it, and another commit wrote that key
  between the version it read and its own commit;
- ``read-skew``: a read did not see the newest write committed at the transaction's snapshot
  (its reads are not one snapshot);
- ``G1c``: a cycle of write-write and write-read dependencies alone;
- ``G-single``: a cycle with exactly one anti-dependency (read-write) edge;
- ``G2``: any other cycle (two or more anti-dependencies; write skew is the short one).

Snapshot isolation forbids all but ``G2``; serializable forbids all of them.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass, field

INITIAL = "init"
"""The value every key holds before any transaction wrote it."""


@dataclass
class Txn:
    """One transaction as a process recorded it: what it read and wrote, and how it ended."""

    id: str
    snapshot: int
    """The database version its reads were of."""
    reads: dict[str, str] = field(default_factory=dict)
    """Key to the value read (the id of the transaction that wrote it, or ``INITIAL``)."""
    writes: set[str] = field(default_factory=set)
    committed: int | None = None
    """The database version it committed as; ``None`` if it was refused or aborted."""


def anomalies(history: list[Txn]) -> dict[str, list[str]]:
    """Every anomaly of ``history`` by name (see the module docstring); empty lists for none."""
    found: dict[str, list[str]] = {k: [] for k in ("G1a", "lost-update", "read-skew", "G1c", "G-single", "G2")}
    committed = {t.id: t for t in history if t.committed is not None}
    order: dict[str, list[str]] = defaultdict(list)  # key -> writers, in commit order
    for t in sorted(committed.values(), key=lambda t: t.committed or 0):
        for key in t.writes:
            order[key].append(t.id)

    def version(key: str, writer: str) -> int:
        """The writer's position in the key's order (0 for the initial value)."""
        return 0 if writer == INITIAL else order[key].index(writer) + 1

    edges: dict[str, set[tuple[str, str]]] = defaultdict(set)  # from -> {(to, kind)}
    for writers in order.values():
        for a, b in itertools.pairwise(writers):
            edges[a].add((b, "ww"))
    for t in history:
        for key, seen in t.reads.items():
            if seen != INITIAL and seen not in committed:
                found["G1a"].append(f"{t.id} read {key}={seen}, which never committed")
                continue
            if seen == t.id:  # its own write
                continue
            at = version(key, seen)
            newest = [w for w in order[key] if (committed[w].committed or 0) <= t.snapshot]
            if (newest[-1] if newest else INITIAL) != seen:
                found["read-skew"].append(f"{t.id} (snapshot {t.snapshot}) read {key}={seen}, not {newest[-1:]}")
            if t.committed is None:
                continue
            if seen != INITIAL:
                edges[seen].add((t.id, "wr"))
            if at < len(order[key]):
                successor = order[key][at]
                if successor != t.id:
                    edges[t.id].add((successor, "rw"))
                    if key in t.writes:
                        found["lost-update"].append(f"{t.id} read {key}={seen} and wrote it over {successor}'s write")
    _cycles(committed, edges, found)
    return found


def _cycles(committed: dict[str, Txn], edges: dict[str, set[tuple[str, str]]], found: dict[str, list[str]]) -> None:
    """Classify the dependency cycles among committed transactions."""

    def reaches(start: str, goal: str, kinds: set[str]) -> bool:
        seen, stack = {start}, [start]
        while stack:
            node = stack.pop()
            for to, kind in edges.get(node, ()):
                if kind not in kinds or to in seen:
                    continue
                if to == goal:
                    return True
                seen.add(to)
                stack.append(to)
        return False

    explained: set[str] = set()
    for a in committed:
        for b, kind in edges.get(a, ()):
            if kind != "rw" and reaches(b, a, {"ww", "wr"}):
                found["G1c"].append(f"{a} -{kind}-> {b} -> ... -> {a}")
                explained |= {a, b}
            elif kind == "rw" and reaches(b, a, {"ww", "wr"}):
                found["G-single"].append(f"{a} -rw-> {b} -> ... -> {a}")
                explained |= {a, b}
    for a in committed:
        if a in explained:
            continue
        for b, _ in edges.get(a, ()):
            if reaches(b, a, {"ww", "wr", "rw"}):
                found["G2"].append(f"{a} -> {b} -> ... -> {a}")
                break
