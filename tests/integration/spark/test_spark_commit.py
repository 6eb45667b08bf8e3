"""The Spark data source's commit and abort, driven as Spark drives them, on S3 over HTTP: a
write never deletes files a committed version may name, and the commit function is called in
the table's region."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from helpers.lossy import losing
from helpers.tables import EVENTS, events

import castable
from castable.deployment import invocation
from castable.errors import CommitStateUnknownError, InvalidInputError
from castable.spark import remote
from castable.spark.datasource import CastableWriter, FilesWritten
from castable.spark.files import TableTarget, WriteMode
from castable.spark.ingest import ingest
from castable.table import Table
from castable.tables import load_table

SMALL = {"write.target-file-size-bytes": "2000"}


@pytest.fixture
def table(s3_bucket: str, s3_options: dict[str, str]) -> Table:
    return castable.create_table(
        f"s3://{s3_bucket}/events", EVENTS, primary_key="id", properties=SMALL, storage_options=s3_options
    )


def _tasks(writer: CastableWriter, *parts: pa.Table) -> list[FilesWritten]:
    """What Spark's tasks would send the driver: each writes its part's files."""
    return [writer.write(iter(p.to_batches())) for p in parts]


def _exists(t: Table, messages: list[Any]) -> list[bool]:
    return [t.store.exists(f["path"]) for m in messages if m is not None for f in m.files]


def test_a_commit_of_unknown_outcome_keeps_its_files_and_says_how_to_finish(
    table: Table, s3_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit lands, then the store fails so the caller cannot know: the version names the
    files, and neither the commit nor Spark's abort after it may delete them."""
    real = WriteMode.commit

    def lands_then_fails(self: WriteMode, t: Table, files: Any, commit_id: str) -> int:
        real(self, t, files, commit_id)
        raise CommitStateUnknownError("the store timed out on the manifest PUT", commit_id)

    monkeypatch.setattr(WriteMode, "commit", lands_then_fails)
    writer = CastableWriter(TableTarget.of(table, s3_options), WriteMode(), "job-7", None)
    messages: list[Any] = _tasks(writer, events(0, 50), events(50, 100))
    with pytest.raises(CommitStateUnknownError, match=r"files written are kept.*commitId', 'job-7'") as raised:
        writer.commit(messages)
    assert raised.value.commit_id == "job-7"
    writer.abort(messages)
    assert all(_exists(table, messages)), "abort after the commit deleted files the version names"
    assert load_table(table.store).to_arrow().sort_by("id").equals(events(0, 100))


def test_a_refused_commit_deletes_its_files_and_abort_after_it_is_harmless(
    table: Table, s3_options: dict[str, str]
) -> None:
    table.append(events(0, 10))
    writer = CastableWriter(TableTarget.of(table, s3_options), WriteMode("overwrite", "id < 15"), "rw", None)
    messages: list[Any] = _tasks(writer, events(10, 20))
    with pytest.raises(castable.CastableError, match="do not match"):
        writer.commit(messages)
    assert not any(_exists(table, messages)), "nothing of a refused commit is kept"
    writer.abort(messages)
    assert load_table(table.store).version == 1


def test_a_commit_that_failed_but_landed_keeps_its_files(
    table: Table, s3_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever a commit raises, its files are deleted only if the table does not hold it."""
    real = WriteMode.commit

    def lands_then_conflicts(self: WriteMode, t: Table, files: Any, commit_id: str) -> int:
        real(self, t, files, commit_id)
        raise castable.CommitConflictError("lost, it seemed")

    monkeypatch.setattr(WriteMode, "commit", lands_then_conflicts)
    writer = CastableWriter(TableTarget.of(table, s3_options), WriteMode(), "job-8", None)
    messages: list[Any] = _tasks(writer, events(0, 30))
    writer.commit(messages)  # the table holds it: the write succeeded
    writer.abort(messages)
    assert all(_exists(table, messages))
    assert load_table(table.store).to_arrow().sort_by("id").equals(events(0, 30))


def test_abort_after_a_failed_task_deletes_what_the_finished_tasks_wrote(
    table: Table, s3_options: dict[str, str]
) -> None:
    writer = CastableWriter(TableTarget.of(table, s3_options), WriteMode(), "failed-task", None)
    finished: list[Any] = _tasks(writer, events(0, 40))
    assert all(_exists(table, finished))
    writer.abort([*finished, None])  # the second task never finished: no commit was attempted
    assert not any(_exists(table, finished))
    assert load_table(table.store).version == 0


def test_a_retried_application_recognises_each_write_by_its_rows_in_any_order(
    table: Table, s3_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without commitId a write commits as its application and the digest of its rows: a retried
    application that runs its writes in another order, split over other tasks, commits each
    exactly once and deletes what its tasks wrote again; a write of other rows commits."""
    monkeypatch.setattr("castable.spark.datasource.task_application", lambda: "application_17_0001")
    target = TableTarget.of(table, s3_options)

    def run(*parts: pa.Table) -> list[Any]:
        writer = CastableWriter(target, WriteMode(), None, None)
        messages: list[Any] = _tasks(writer, *parts)
        writer.commit(messages)
        return messages

    run(events(0, 50), events(50, 100))  # write X
    run(events(100, 107))  # write Y
    ids_ = [h.commit_id for h in load_table(table.store).history(limit=2)]
    assert all(i.startswith("spark-application_17_0001-") for i in ids_) and len(set(ids_)) == 2
    before = load_table(table.store).version
    again = run(events(100, 103), events(103, 107))  # the retry: Y first, split otherwise
    again += run(events(70, 100), events(0, 70))  # then X, its rows in another order
    assert not any(_exists(table, again)), "a recognised write's files are deleted"
    after = load_table(table.store)
    assert after.version == before and after.to_arrow().sort_by("id").equals(events(0, 107))
    run(events(100, 106))  # a write of other rows (one row fewer than Y) is a write of its own
    assert load_table(table.store).count() == 113


def test_the_same_rows_written_in_another_mode_are_another_write(
    table: Table, s3_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("castable.spark.datasource.task_application", lambda: "application_17_0002")
    target = TableTarget.of(table, s3_options)
    for mode in (WriteMode(), WriteMode("overwrite", "id < 100")):
        writer = CastableWriter(target, mode, None, None)
        writer.commit(_tasks(writer, events(0, 10)))
    newest, previous = load_table(table.store).history(limit=2)
    assert newest.commit_id != previous.commit_id and newest.operation != previous.operation
    assert load_table(table.store).count() == 10


def test_a_write_outside_a_known_job_commits_under_a_random_id(table: Table, s3_options: dict[str, str]) -> None:
    writer = CastableWriter(TableTarget.of(table, s3_options), WriteMode(), None, None)
    writer.commit(_tasks(writer, events(0, 5)))  # no Spark task context: no job to name
    writer.commit(_tasks(writer, events(5, 10)))
    history = load_table(table.store).history(limit=2)
    assert len({h.commit_id for h in history}) == 2 and load_table(table.store).count() == 10


def test_the_commit_function_is_called_in_the_tables_region(
    table: Table, s3_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert invocation.lambda_client("eu-west-3").meta.region_name == "eu-west-3"
    regions: list[str | None] = []

    def no_call(*args: Any, region: str | None = None, **kwargs: Any) -> dict[str, Any]:
        regions.append(region)
        raise InvalidInputError("stop here")

    monkeypatch.setattr("castable.spark.ingest.invoke_commit", no_call)
    spark_df = _FakeFrame(events(0, 5))
    options = {**s3_options, "region": "eu-west-3"}
    with pytest.raises(InvalidInputError, match="stop here"):
        ingest(spark_df, table.uri, "r1", storage_options=options, commit_function="castable-commit")  # type: ignore[arg-type]
    assert regions == ["eu-west-3"]


class _FakeFrame:
    """Just enough of a DataFrame for ``write_files``: columns, select, mapInArrow, collect."""

    def __init__(self, data: pa.Table) -> None:
        self.data = data
        self.columns = data.column_names

    def select(self, *names: str) -> _FakeFrame:
        return _FakeFrame(self.data.select(list(names)))

    def mapInArrow(self, fn: Any, schema: str) -> _FakeFrame:
        return _FakeFrame(pa.Table.from_batches(list(fn(iter(self.data.to_batches())))))

    def collect(self) -> list[dict[str, Any]]:
        return self.data.to_pylist()


def test_a_commit_through_the_function_whose_answer_was_lost_lands_once(
    table: Table, s3_options: dict[str, str], commit_function: str
) -> None:
    """The commit function commits, its answer to the job is lost, and the SDK invokes it
    again with the same event: the second invocation returns the version the first made."""
    (entry,) = TableTarget.of(table, s3_options).write(iter(events(0, 20).to_batches()))
    client = invocation.lambda_client("us-east-1")
    with losing(lambda method, url: "invocations" in url, service="lambda") as injected:
        before = injected["lose"]
        result = remote.invoke_commit(commit_function, table.uri, [entry.path], "job-lost", client=client)
    assert injected["lose"] == before + 1, "the first invocation's answer was lost and the SDK invoked again"
    after = load_table(table.store)
    assert after.version == result["version"] == 1 and after.count() == 20
