"""The commit protocol under crashes, lost responses, conflicts and contention (DESIGN section 2)."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers.faults import FaultyStore, SimulatedCrash, once
from helpers.tables import EVENTS, FILES_ONLY, events, keyed_events, snapshot_of

import castable
from castable.commit.pointer import advance_pointer, read_pointer
from castable.commit.protocol import backoff
from castable.errors import CommitConflictError, CommitStateUnknownError
from castable.format.layout import POINTER_KEY, manifest_key
from castable.maintenance.gc import retained_versions
from castable.store import StoreError, store_from_uri
from castable.table import Table
from castable.tables import create_table_at, load_table


@pytest.fixture
def base(table_uri: tuple[str, dict | None]) -> Table:
    return keyed_events(table_uri, 10)


def faulty(t: Table, rule) -> Table:  # type: ignore[no-untyped-def]
    return load_table(FaultyStore(t.store, rule))


def ids(t: Table) -> list[int]:
    return sorted(load_table(t.store).scan(["id"]).to_arrow().column("id").to_pylist())


def pointer_version(t: Table) -> int:
    return read_pointer(t.store).version


@pytest.mark.parametrize(("properties", "orphans"), [(FILES_ONLY, ["data", "segment"]), (None, ["segment"])])
def test_crash_after_data_upload_leaves_only_an_orphan(
    table_uri: tuple[str, dict | None], properties: dict[str, str] | None, orphans: list[str]
) -> None:
    """The data file and the segment listing it, or the segment alone when the rows were few
    enough to be kept inline in it, are orphans; nothing else changed."""
    base = keyed_events(table_uri, 10, properties)
    before = snapshot_of(base.store)
    writer = faulty(base, once("put", "manifest/", "crash-before"))
    with pytest.raises(SimulatedCrash):
        writer.append(events(10, 20))
    after = snapshot_of(base.store)
    added = sorted(set(after) - set(before))
    assert [k.split("/")[0] for k in added] == orphans
    assert {k: v for k, v in after.items() if k in before} == before
    assert ids(base) == list(range(10))
    assert load_table(base.store).append(events(20, 30)).version == 2
    assert ids(base) == [*range(10), *range(20, 30)]


def test_crash_between_manifest_and_pointer_is_rolled_forward(base: Table) -> None:
    stale = load_table(base.store)
    writer = faulty(base, once("put", POINTER_KEY, "crash-before"))
    with pytest.raises(SimulatedCrash):
        writer.append(events(10, 20))
    assert pointer_version(base) == 1, "the pointer lags the committed version 2"
    assert load_table(base.store).version == 2, "readers probe past a lagging pointer"
    assert ids(base) == list(range(20))
    assert stale.append(events(20, 30)).version == 3, "a writer that finds the pointer behind rebases"
    assert pointer_version(base) == 3
    assert ids(base) == list(range(30))


def test_crash_after_pointer_cas_is_committed(base: Table) -> None:
    writer = faulty(base, once("put", POINTER_KEY, "crash-after"))
    with pytest.raises(SimulatedCrash):
        writer.append(events(10, 20))
    assert pointer_version(base) == 2 and ids(base) == list(range(20))


def test_crash_during_retry_then_rerun_with_same_commit_id(base: Table) -> None:
    loser = faulty(base, once("get", manifest_key(2), "crash-before", skip=1))
    load_table(base.store).append(events(10, 20))
    with pytest.raises(SimulatedCrash):
        loser.append(events(20, 30), commit_id="job-7")
    assert ids(base) == list(range(20))
    rerun = load_table(base.store)
    version = rerun.append(events(20, 30), commit_id="job-7").version
    assert version == 3
    assert rerun.append(events(20, 30), commit_id="job-7").version == 3
    assert ids(base) == list(range(30))
    assert [h.commit_id for h in rerun.history()].count("job-7") == 1


def test_lost_response_on_commit_is_recognised(base: Table) -> None:
    writer = faulty(base, once("put", manifest_key(2), "lose-response"))
    assert writer.append(events(10, 20), commit_id="ambiguous").version == 2
    assert load_table(base.store).version == 2
    assert ids(base) == list(range(20))
    assert pointer_version(base) == 2


def test_unknown_outcome_then_retry_commits_once(base: Table) -> None:
    """The PUT's response is lost and the read that would tell fails too: the caller learns the
    outcome is unknown, and a retry with the same ``commit_id`` commits nothing twice."""
    put_done = False

    def rule(op: str, key: str) -> str | None:
        nonlocal put_done
        if key == manifest_key(2) and op == "put":
            put_done = True
            return "lose-response"
        if key == manifest_key(2) and op == "get" and put_done:
            return "fail"
        return None

    with pytest.raises(CommitStateUnknownError) as info:
        faulty(base, rule).append(events(10, 20), commit_id="maybe")
    assert info.value.commit_id == "maybe"
    retry = load_table(base.store)
    assert retry.append(events(10, 20), commit_id="maybe").version == 2
    assert ids(base) == list(range(20))


def test_a_landed_commit_whose_retry_got_412_is_recognised(base: Table) -> None:
    """A 500 on the manifest PUT that had in fact landed, retried by botocore into a 412: the
    writer rebases, finds its own commit_id in the newest version and commits nothing twice."""
    writer = faulty(base, once("put", manifest_key(2), "landed-then-412"))
    assert writer.append(events(10, 20), commit_id="retried").version == 2
    assert load_table(base.store).version == 2 and pointer_version(base) == 2
    assert ids(base) == list(range(20))


def test_a_landed_commit_seen_as_lost_when_its_time_runs_out_is_still_recognised(
    table_uri: tuple[str, dict | None],
) -> None:
    """The same 412 on the last attempt the commit timeout allows: the writer does not report a
    conflict ('nothing was committed') for a version that holds its commit, it returns it."""
    uri, options = table_uri
    t = castable.create_table(
        uri, EVENTS, primary_key="id", properties={"commit.timeout-seconds": "0.01"}, storage_options=options
    )

    def slow_then_412(op: str, key: str) -> str | None:
        if op == "put" and key == manifest_key(1):
            time.sleep(0.05)  # the attempt outlasts the timeout: no second one
            return "landed-then-412"
        return None

    assert faulty(t, slow_then_412).append(events(0, 10), commit_id="late").version == 1
    assert load_table(t.store).manifest.recent_commits.get("late") == 1
    assert ids(t) == list(range(10))


def test_a_commit_out_of_time_that_cannot_check_its_attempts_is_of_unknown_outcome(
    table_uri: tuple[str, dict | None],
) -> None:
    uri, options = table_uri
    t = castable.create_table(
        uri, EVENTS, primary_key="id", properties={"commit.timeout-seconds": "0.01"}, storage_options=options
    )
    landed = False

    def rule(op: str, key: str) -> str | None:
        nonlocal landed
        if op == "put" and key == manifest_key(1):
            time.sleep(0.05)
            landed = True
            return "landed-then-412"
        return "fail" if landed and op == "get" else None  # and then the store cannot be read

    with pytest.raises(CommitStateUnknownError, match="could not be checked") as info:
        faulty(t, rule).append(events(0, 10), commit_id="unsure")
    assert info.value.commit_id == "unsure"
    assert load_table(t.store).append(events(0, 10), commit_id="unsure").version == 1, (
        "a retry finds it and adds nothing"
    )
    assert ids(t) == list(range(10))


def test_failed_manifest_put_that_did_not_land_is_retried(base: Table) -> None:
    writer = faulty(base, once("put", manifest_key(2), "fail"))
    assert writer.append(events(10, 20)).version == 2
    assert ids(base) == list(range(20))


def test_conditional_request_conflict_is_retried(base: Table) -> None:
    writer = faulty(base, once("put", manifest_key(2), "conflict"))
    assert writer.append(events(10, 20)).version == 2


def test_commit_gives_up_after_its_time_bound(table_uri: tuple[str, dict | None]) -> None:
    """A writer that loses every race stops after ``commit.timeout-seconds``, commits nothing,
    and leaves its handle at the newest version it saw."""
    uri, options = table_uri
    t = castable.create_table(uri, EVENTS, properties={"commit.timeout-seconds": 0.3}, storage_options=options)
    rival = load_table(t.store)
    counter = iter(range(1000, 2000))

    def rule(op: str, key: str) -> str | None:
        if op == "put" and key.startswith("manifest/"):
            n = next(counter)
            rival.append(events(n, n + 1))
        return None

    writer = faulty(t, rule)
    with pytest.raises(CommitConflictError, match=r"lost to concurrent writers for 0\.3 s"):
        writer.append(events(0, 5))
    rival_commits = next(counter) - 1000
    assert rival_commits >= 2
    assert sorted(ids(t)) == list(range(1000, 1000 + rival_commits))
    assert writer.version == load_table(t.store).version, "the failed commit left the handle refreshed"


def test_pointer_never_moves_backwards(base: Table) -> None:
    base.append(events(10, 20))
    assert pointer_version(base) == 2
    advance_pointer(base.store, 1, None)
    assert pointer_version(base) == 2
    doc = json.loads(base.store.get(POINTER_KEY).data)
    assert doc == {"version": 2, "manifest": manifest_key(2)}


def test_pointer_failure_after_commit_is_not_an_error(base: Table) -> None:
    def rule(op: str, key: str) -> str | None:
        return "fail" if op == "put" and key == POINTER_KEY else None

    assert faulty(base, rule).append(events(10, 20)).version == 2
    assert pointer_version(base) == 1
    assert load_table(base.store).version == 2


def test_delete_rebases_over_concurrent_appends(base: Table) -> None:
    deleter = load_table(base.store)
    load_table(base.store).append(events(10, 20))
    deleter.delete("id < 5")
    assert ids(base) == list(range(5, 20))


def test_delete_replans_when_its_file_was_removed(base: Table) -> None:
    base.append(events(10, 20))
    slow = load_table(base.store)
    load_table(base.store).delete("id < 10")
    slow.delete("id BETWEEN 5 AND 12")
    assert slow.manifest.commit.summary["replans"] == 1
    assert ids(base) == list(range(13, 20))


def test_store_error_on_read_surfaces(table_uri: tuple[str, dict | None]) -> None:
    base = keyed_events(table_uri, 10, FILES_ONLY)
    reader = faulty(base, lambda op, key: "fail" if op == "open_input" else None)
    with pytest.raises(StoreError):
        reader.scan().to_arrow()


@pytest.mark.parametrize(
    ("attempt", "window"),
    [(1, 0.01), (2, 0.02), (3, 0.04), (4, 0.08), (8, 0.08), (9, 0.01), (30, 0.01)],
)
def test_backoff_scales_with_the_attempt_time_grows_and_ages(attempt: int, window: float) -> None:
    """Waits are jittered within 2**n attempt-times (n capped at 3), and back to one attempt-time
    once a writer has lost 8 times in a row."""
    state = SimpleNamespace(attempt_number=attempt, seconds_since_start=0.01 * attempt + 5.0, idle_for=5.0)
    waits = [backoff(state) for _ in range(400)]  # type: ignore[arg-type]
    assert all(0 <= w <= window + 1e-9 for w in waits)
    assert max(waits) > window * 0.8, "the whole window is used"


def test_a_create_that_crashed_before_its_pointer_is_completed(table_uri: tuple[str, dict | None]) -> None:
    """Version 0 without a pointer: the table opens, the next write creates the pointer, and a
    create with the same definition completes it; one with another is refused."""
    uri, options = table_uri
    crashed = FaultyStore(store_from_uri(uri, options), once("put", POINTER_KEY, "crash-before"))
    with pytest.raises(SimulatedCrash):
        create_table_at(crashed, EVENTS, primary_key="id")
    assert castable.open_table(uri, storage_options=options).version == 0
    with pytest.raises(castable.TableAlreadyExistsError, match="half-created"):
        castable.create_table(uri, EVENTS, storage_options=options)
    again = castable.create_table(uri, EVENTS, primary_key="id", storage_options=options)
    assert again.version == 0 and pointer_version(again) == 0
    assert again.append(events(0, 5)).version == 1 and pointer_version(again) == 1


def test_a_missing_pointer_is_created_by_the_next_commit(table_uri: tuple[str, dict | None]) -> None:
    uri, options = table_uri
    base = castable.create_table(uri, EVENTS, primary_key="id", storage_options=options)
    base.append(events(0, 10))
    base.store.delete(POINTER_KEY)
    reopened = castable.open_table(uri, storage_options=options)
    assert reopened.version == 1
    assert reopened.append(events(10, 20)).version == 2 and pointer_version(base) == 2


def test_an_unreadable_pointer_after_a_failed_advance_is_an_unknown_outcome(base: Table) -> None:
    """The version landed but neither the pointer's move nor its read worked: success cannot be
    claimed (the version might lie below the retention floor), so the outcome is reported unknown
    and a retry with the same commit_id settles it without committing twice."""
    landed = False

    def rule(op: str, key: str) -> str | None:
        nonlocal landed
        if op == "put" and key == manifest_key(2):
            landed = True
        return "fail" if landed and key == POINTER_KEY else None

    with pytest.raises(CommitStateUnknownError, match="retry with the same commit_id"):
        faulty(base, rule).append(events(10, 20), commit_id="unsure")
    assert load_table(base.store).append(events(10, 20), commit_id="unsure").version == 2
    assert ids(base) == list(range(20))


def test_a_retried_commit_whose_version_expired_still_answers(base: Table) -> None:
    """A job re-run with its commit_id long after: its version is expired, the answer stands."""
    stale = load_table(base.store)
    base.append(events(10, 20), commit_id="old-job")
    for i in range(3):
        base.append(events(100 + i, 101 + i))
    base.expire(retain_versions=1)
    assert stale.append(events(10, 20), commit_id="old-job").version == 2
    assert ids(base) == [*range(20), 100, 101, 102]


def test_a_manifest_a_stale_writer_puts_below_the_floor_is_never_read(tmp_path: Path) -> None:
    """A writer whose base expired re-creates an expired version's manifest for a moment before
    its floor check deletes it: in that moment no reader, gc or time travel takes it for a
    version of the table (it may name files gc already swept)."""
    t = castable.create_table(str(tmp_path / "t"), EVENTS, primary_key="id")
    t.append(events(0, 10))
    stale = load_table(t.store)
    for i in range(1, 9):
        t.append(events(i * 10, i * 10 + 10))
    t.compact()
    t.append(events(500, 501))
    t.append(events(501, 502))
    t.expire(retain_versions=2)
    t.gc(orphan_grace=timedelta(0))
    seen: dict[str, object] = {}
    put: list[str] = []

    def rule(op: str, key: str) -> None:
        """Right after the stale writer's manifest PUT, before it checks the floor: look."""
        if op == "put" and key.startswith("manifest/"):
            put.append(key)
        elif put and not seen:
            seen["put"] = put[0]
            seen["retained"] = retained_versions(t.store)
            seen["oldest"] = t.scan(version=seen["retained"][0]).count()  # type: ignore[index]
            with pytest.raises(castable.VersionNotFoundError, match="expired"):
                t.scan(version=2)

    writer = Table.standalone(FaultyStore(stale.store, rule), stale.manifest)
    assert writer.append(events(900, 905)).version == 13
    assert seen["put"] == manifest_key(2) and seen["retained"] == [11, 12] and seen["oldest"] == 91
    assert sorted(t.refresh().scan(["id"]).to_arrow().column("id").to_pylist())[-5:] == list(range(900, 905))
