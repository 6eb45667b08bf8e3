"""Code run in worker processes by the multi-process tests (spawned, so importable by name)."""

from __future__ import annotations

import os

from conftest import events

import castable


def append_and_delete(uri: str, options: dict | None, worker: int, rounds: int) -> list[tuple[str, int, str]]:
    """Append a block of this worker's own ids per round, then delete part of it two ways.

    Returns (operation, version, commit_id) for every commit this worker made.
    """
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    table = castable.open_table(uri, storage_options=options)
    done = []
    for r in range(rounds):
        start = worker * 10_000 + r * 100
        cid = f"w{worker}-r{r}"
        done.append(("append", table.append(events(start, start + 100), commit_id=f"{cid}-append"), f"{cid}-append"))
        v = table.delete(f"id BETWEEN {start} AND {start + 9}", commit_id=f"{cid}-range")
        done.append(("delete", v, f"{cid}-range"))
        v = table.delete(
            f"id IN ({start + 50}, {start + 77}) OR (id > {start + 90} AND id < {start + 95})",
            commit_id=f"{cid}-scatter",
        )
        done.append(("delete", v, f"{cid}-scatter"))
    return done


def append_rows(uri: str, options: dict | None, worker: int, commits: int) -> list[int]:
    """Append ``commits`` one-row batches with one handle and default settings; return the versions."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    table = castable.open_table(uri, storage_options=options)
    return [table.append(events(worker * 1000 + i, worker * 1000 + i + 1)) for i in range(commits)]


def expected_ids(worker: int, rounds: int) -> set[int]:
    keep = set()
    for r in range(rounds):
        start = worker * 10_000 + r * 100
        gone = {*range(start, start + 10), start + 50, start + 77, *range(start + 91, start + 95)}
        keep |= set(range(start, start + 100)) - gone
    return keep


def erase_or_delete(uri: str, options: dict | None, worker: int) -> list[int]:
    """Even workers erase ids, odd workers soft-delete ids, all in the same data file."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    table = castable.open_table(uri, storage_options=options)
    targets = [worker * 10_000 + k * 97 for k in range(3)]
    for target in targets:
        if worker % 2:
            table.delete(f"id = {target}")
        else:
            table.erase(f"id = {target}", mode="splice")
    return targets


def maintain(uri: str, options: dict | None, seconds: float) -> dict[str, int]:
    """Compact, expire and collect garbage in a loop while other processes write."""
    import time
    from datetime import timedelta

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    table = castable.open_table(uri, storage_options=options)
    done = {"compactions": 0, "expired": 0, "swept": 0}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        table.refresh()
        if table.compact(min_file_size=10**9).files_rewritten:
            done["compactions"] += 1
        done["expired"] += len(table.expire(retain_versions=5).versions_expired)
        done["swept"] += len(table.gc(orphan_grace=timedelta(seconds=20)).objects)
    return done
