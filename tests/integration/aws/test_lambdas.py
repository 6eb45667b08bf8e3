"""The Lambda handlers against S3 on a moto server over HTTP, with realistic events."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import re
from dataclasses import dataclass, replace
from typing import Any

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pydantic
import pytest
from helpers.aws_stubs import sqs_event
from helpers.damaged import DAMAGES, damaged
from helpers.filelists import LIES, lying_entry
from helpers.lossy import Faults, network
from helpers.s3servers import seed_moto_objects
from helpers.tables import EVENTS, events, parquet_bytes, snapshot_of

os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "castable-test")

import castable
from castable.errors import FileMismatchError
from castable.format.manifest import DataFile
from castable.format.properties import AFTER_COMMIT, TableProperties
from castable.format.segment import data_table, encode
from castable.ops.register import write_file_list
from castable.parquet.writer import write_data_files
from castable.table import Table
from castable.tables import load_table
from lambdas import commit, tombstone
from lambdas.runtime import InvalidEventError, logger, parse


@dataclass
class Context:
    function_name: str = "castable-test"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:castable-test"
    aws_request_id: str = "req-1"


@pytest.fixture
def table(s3_bucket: str, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Table:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    t = castable.create_table(f"s3://{s3_bucket}/tables/events", EVENTS, primary_key="id")
    t.append(events(0, 10))
    return t


def upload(t: Table, key: str, data: pa.Table) -> str:
    buf = io.BytesIO()
    pq.write_table(data, buf)
    t.store.put(key, buf.getvalue())
    return key


def ids(t: Table) -> list[int]:
    return sorted(load_table(t.store).scan(["id"]).to_arrow().column("id").to_pylist())


def test_commit_registers_spark_output_idempotently(table: Table) -> None:
    files = [upload(table, f"data/emr/run-7/part-{i}.parquet", events(100 + 10 * i, 110 + 10 * i)) for i in range(3)]
    event = {"table": table.uri, "files": files, "commit_id": "emr-run-7"}
    result = commit.handler(event, Context())
    assert result["version"] == 2 and result["summary"]["files_added"] == 3
    assert commit.handler(event, Context())["version"] == 2, "a duplicate delivery commits nothing twice"
    assert ids(table) == [*range(10), *range(100, 130)]


@pytest.mark.slow
def test_commit_takes_a_file_list_of_any_number_of_files(table: Table) -> None:
    """A path list rides in the event and stops at 10,000; a file list has no count of its own.
    1,001 files whose entries a job left as one file list: one commit, each file checked, their
    statistics kept from the writer's (bench/deployment/commit_scale.py and filelist_check.py
    commit 10,000 and more within the function's timeout)."""
    with pytest.raises(pydantic.ValidationError, match="at most 10000 items"):
        commit.CommitEvent(table=table.uri, files=[f"data/{i}.parquet" for i in range(10_001)], commit_id="c")
    (written,) = write_data_files(
        table.store, [events(500, 510).to_batches()[0]], table.schema, TableProperties.parse(table.properties)
    )
    bucket, prefix = table.store.bucket, table.store.prefix  # type: ignore[attr-defined]
    entries = [replace(written, path=f"data/emr/run-12/part-{i:05d}.parquet") for i in range(1_001)]
    data = table.store.get(written.path).data  # the job's files, stored directly: setup, not under test
    seed_moto_objects(bucket, ((f"{prefix}/{e.path}", data) for e in entries))
    listed = write_file_list(table.store, "emr-run-12", entries, table.schema)
    event = {"table": table.uri, "file_list": listed, "commit_id": "emr-run-12", "verify": "footer"}
    result = commit.handler(event, Context())
    assert result["summary"]["files_added"] == 1_001 and result["summary"]["rows_added"] == 10_010
    after = load_table(table.store)
    assert after.count() == 10 + 10_010
    assert after.scan(filter="id > 509").count() == 0, "the writer's statistics prune"
    table.store.delete(listed)
    assert commit.handler(event, Context())["version"] == result["version"], "a retry, its list gone, commits once"


@pytest.mark.parametrize(
    ("file_list", "message"),
    [
        ("data/elsewhere.arrow", "lies under data/_file_lists/"),
        ("data/_file_lists/../../manifest/v1.json", "lies under data/_file_lists/"),
        ("data/_file_lists/missing.arrow", "does not exist"),
        ("data/_file_lists/garbage.arrow", "is not a castable file list"),
    ],
)
def test_commit_refuses_a_bad_file_list_and_changes_nothing(table: Table, file_list: str, message: str) -> None:
    table.store.put("data/_file_lists/garbage.arrow", b"not arrow")
    before = snapshot_of(table.store)
    with pytest.raises(castable.InvalidInputError, match=message):
        commit.handler({"table": table.uri, "file_list": file_list, "commit_id": "bad"}, Context())
    with pytest.raises(InvalidEventError):
        commit.handler(
            {"table": table.uri, "files": ["data/x.parquet"], "file_list": file_list, "commit_id": "b"}, Context()
        )
    assert snapshot_of(table.store) == before


@pytest.mark.parametrize("lie", LIES)
def test_commit_refuses_a_file_list_that_disagrees_with_a_footer(table: Table, lie: str) -> None:
    """A job's file list with one entry that lies (rows, key range, nulls, row groups, schema):
    the function reads every listed file's footer, refuses the commit naming that file, and the
    table is unchanged: same version, same files, same bytes."""
    (good,) = write_data_files(
        table.store, events(300, 320).to_batches(), table.schema, TableProperties.parse(table.properties)
    )
    bad = lying_entry(table, lie)
    listed = write_file_list(table.store, "emr-run-13", [good, bad], table.schema)
    before, version = snapshot_of(table.store), table.version
    error, message = LIES[lie]
    event = {"table": table.uri, "file_list": listed, "commit_id": "emr-run-13", "verify": "footer"}
    with pytest.raises(error, match=re.escape(bad.path)) as refused:
        commit.handler(event, Context())
    assert message in str(refused.value)
    assert snapshot_of(table.store) == before
    after = load_table(table.store)
    assert after.version == version and after.count() == 10 and ids(table) == list(range(10))


@pytest.fixture
def sliced(table: Table, commit_function: str, monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The commit function in "Lambda" with slices of 4 entries: the slices its invocations
    check, as they are checked (each invocation reaches moto and runs the handler again)."""
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", commit_function)
    monkeypatch.setenv("CASTABLE_CHECK_SLICE_FILES", "4")
    checked: list[list[int]] = []
    check_slice = commit.check_slice

    def recording(event: commit.CheckEvent) -> dict[str, Any]:
        checked.append(list(event.check))
        return check_slice(event)

    monkeypatch.setattr(commit, "check_slice", recording)
    return checked


def thirteen_files(t: Table) -> list[DataFile]:
    """13 files of 10 rows each, ids 1000 to 1129, as castable's writer describes them."""
    properties = TableProperties.parse(t.properties)
    return [
        f
        for i in range(13)
        for f in write_data_files(t.store, events(1000 + 10 * i, 1010 + 10 * i).to_batches(), t.schema, properties)
    ]


def test_commit_splits_a_long_file_list_across_invocations_of_itself(table: Table, sliced: list[list[int]]) -> None:
    """13 entries, 4 a slice: four invocations of the function check them, the one invoked
    commits them once without reading them again, and a redelivered event commits nothing twice."""
    listed = write_file_list(table.store, "emr-run-20", thirteen_files(table), table.schema)
    event = {"table": table.uri, "file_list": listed, "commit_id": "emr-run-20", "verify": "footer"}
    result = commit.handler(event, Context())
    assert sorted(sliced) == [[0, 4], [4, 8], [8, 12], [12, 13]]
    assert result["summary"]["files_added"] == 13 and result["summary"]["rows_added"] == 130
    assert ids(table) == [*range(10), *range(1000, 1130)]
    assert commit.handler(event, Context())["version"] == result["version"] == 2
    assert len(sliced) == 4, "the redelivered event is answered from the log, nothing checked again"
    assert load_table(table.store).count() == 140


def test_a_slice_that_refuses_an_entry_refuses_the_whole_commit(table: Table, sliced: list[list[int]]) -> None:
    """One lying entry in the third slice: its invocation refuses it by name, and the commit
    fails with the same error class, the table unchanged."""
    entries = thirteen_files(table)
    bad = lying_entry(table, "row count")
    entries[9] = bad
    listed = write_file_list(table.store, "emr-run-21", entries, table.schema)
    before = snapshot_of(table.store)
    event = {"table": table.uri, "file_list": listed, "commit_id": "emr-run-21", "verify": "footer"}
    with pytest.raises(FileMismatchError, match=re.escape(bad.path)) as refused:
        commit.handler(event, Context())
    assert LIES["row count"][1] in str(refused.value)
    assert [8, 12] in sliced
    assert snapshot_of(table.store) == before
    assert load_table(table.store).version == 1 and ids(table) == list(range(10))


def test_a_slice_reads_only_the_file_list_the_commit_reads(table: Table) -> None:
    """A slice pinned to the list's ETag refuses a list replaced since, and a range outside it."""
    entries = thirteen_files(table)
    listed = write_file_list(table.store, "emr-run-22", entries, table.schema)
    etag = table.store.head(listed).etag
    check = {"table": table.uri, "file_list": listed, "file_list_etag": etag, "commit_id": "emr-run-22"}
    assert commit.handler({**check, "check": [4, 8]}, Context()) == {"checked": 4}
    with pytest.raises(castable.InvalidInputError, match="not a slice"):
        commit.handler({**check, "check": [8, 14]}, Context())
    table.store.put(listed, encode(data_table(entries[:3], table.schema), "data"))
    with pytest.raises(castable.InvalidInputError, match="was replaced"):
        commit.handler({**check, "check": [0, 4]}, Context())
    with pytest.raises(InvalidEventError):
        commit.handler({**check, "check": [0, 4], "verify": "checked"}, Context())
    with pytest.raises(InvalidEventError):
        commit.handler({"table": table.uri, "file_list": listed, "commit_id": "c", "verify": "checked"}, Context())


def test_commit_adds_columns_once_and_refuses_bad_types(table: Table) -> None:
    """What a Spark write with mergeSchema asks of the function before it writes its files."""
    columns = [{"name": "tag", "type": "string"}, {"name": "at", "type": "timestamp[us, tz=UTC]"}]
    event = {"table": table.uri, "commit_id": "wide-columns", "add_columns": columns}
    version = commit.handler(event, Context())["version"]
    assert load_table(table.store).schema.field("at").type == pa.timestamp("us", tz="UTC")
    assert commit.handler(event, Context())["version"] == version, "a retry adds nothing"
    before = snapshot_of(table.store)
    bad = {"table": table.uri, "commit_id": "bad-type", "add_columns": [{"name": "x", "type": "int65"}]}
    with pytest.raises(castable.InvalidInputError, match="int65"):
        commit.handler(bad, Context())
    with pytest.raises(InvalidEventError):
        commit.handler({**event, "commit_id": "both", "files": ["data/x.parquet"]}, Context())
    with pytest.raises(InvalidEventError):
        commit.handler({**event, "commit_id": "moded", "mode": "upsert"}, Context())
    assert snapshot_of(table.store) == before


def test_commit_upserts_and_overwrites_where_as_the_event_says(table: Table) -> None:
    changed = events(5, 12).set_column(1, "category", pa.array(["z"] * 7))
    files = [upload(table, "data/emr/run-8/part-0.parquet", changed)]
    result = commit.handler({"table": table.uri, "files": files, "commit_id": "r8", "mode": "upsert"}, Context())
    assert result["summary"]["rows_added"] == 7 and result["summary"]["tombstone"]
    assert ids(table) == list(range(12))
    day = [
        upload(table, "data/emr/run-9/part-0.parquet", events(50, 52).set_column(1, "category", pa.array(["z"] * 2)))
    ]
    event = {"table": table.uri, "files": day, "commit_id": "r9", "mode": "overwrite", "where": "category = 'z'"}
    commit.handler(event, Context())
    assert ids(table) == [0, 1, 2, 3, 4, 50, 51]


@pytest.mark.parametrize(
    ("event", "error", "match"),
    [
        ({}, InvalidEventError, "table"),
        ({"table": "{uri}", "files": ["data/x.parquet"], "commit_id": "c", "mode": "merge"}, InvalidEventError, "mode"),
        (
            {"table": "{uri}", "files": ["data/x.parquet"], "commit_id": "c", "where": "id > 1"},
            castable.InvalidInputError,
            "mode='overwrite' only",
        ),
        ({"table": "s3://b", "files": ["data/x.parquet"], "commit_id": "c"}, InvalidEventError, "table"),
        ({"table": "{uri}", "files": [], "commit_id": "c"}, InvalidEventError, "files"),
        ({"table": "{uri}", "files": ["data/x.parquet"]}, InvalidEventError, "commit_id"),
        ({"table": "{uri}", "files": ["data/x.parquet"], "commit_id": "c", "extra": 1}, InvalidEventError, "extra"),
        (
            {"table": "{uri}", "files": ["landing/x.parquet"], "commit_id": "c"},
            castable.InvalidInputError,
            "data prefix",
        ),
        (
            {"table": "{uri}", "files": ["data/missing.parquet"], "commit_id": "c"},
            castable.InvalidInputError,
            "not exist",
        ),
        ({"table": "{uri}", "files": ["data/wrong.parquet"], "commit_id": "c"}, castable.SchemaMismatchError, "id"),
        (
            {"table": "{uri}/other", "files": ["data/x.parquet"], "commit_id": "c"},
            castable.TableNotFoundError,
            "no castable table",
        ),
    ],
)
def test_commit_rejects_bad_input_and_changes_nothing(table: Table, event: dict, error: type, match: str) -> None:
    upload(table, "data/wrong.parquet", pa.table({"id": pa.array([1], pa.int32())}))
    event = {k: (v.replace("{uri}", table.uri) if isinstance(v, str) else v) for k, v in event.items()}
    before = snapshot_of(table.store)
    with pytest.raises(error, match=match):
        commit.handler(event, Context())
    assert snapshot_of(table.store) == before


def test_tombstone_deletes_by_predicate(table: Table) -> None:
    result = tombstone.handler(
        {"table": table.uri, "predicate": "id BETWEEN 2 AND 4", "commit_id": "gdpr-1"}, Context()
    )
    assert result["committed"] and result["version"] == 2
    again = tombstone.handler({"table": table.uri, "predicate": "id BETWEEN 2 AND 4", "commit_id": "gdpr-1"}, Context())
    assert again["version"] == 2
    assert ids(table) == [0, 1, 5, 6, 7, 8, 9]
    nothing = tombstone.handler({"table": table.uri, "predicate": "category = 'zzz'"}, Context())
    assert not nothing["committed"]


def test_metrics_carry_the_table_they_are_about(table: Table, capsys: pytest.CaptureFixture[str]) -> None:
    """Each invocation's metrics (CloudWatch embedded metric format on stdout) have a ``table``
    dimension: the table's prefix in its bucket, so one table's failures stand apart."""
    tombstone.handler({"table": table.uri, "predicate": "id = 3"}, Context())
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    (document,) = [d for d in lines if "_aws" in d and "Deletes" in d]
    path = table.uri.removeprefix("s3://").partition("/")[2]
    assert document["table"] == path
    (dimensions,) = document["_aws"]["CloudWatchMetrics"][0]["Dimensions"]
    assert "table" in dimensions
    keys = logger.get_current_keys()  # what every log line of the invocation carried
    assert keys.get("table") == table.uri, "the log lines name the table too (the event is a union of two models)"


def test_tombstone_rejects_bad_predicates(table: Table) -> None:
    before = snapshot_of(table.store)
    with pytest.raises(castable.InvalidPredicateError):
        tombstone.handler({"table": table.uri, "predicate": "nope = 1"}, Context())
    with pytest.raises(InvalidEventError):
        tombstone.handler({"table": table.uri, "predicate": ""}, Context())
    assert snapshot_of(table.store) == before


def land(t: Table, key: str, data: pa.Table) -> None:
    """Put a Parquet file at ``key`` of the table's bucket (outside the table's prefix)."""
    buf = io.BytesIO()
    pq.write_table(data, buf)
    t.store.client.put_object(Bucket=t.store.bucket, Key=key, Body=buf.getvalue())  # type: ignore[attr-defined]


@pytest.fixture
def ingest_env(table: Table, monkeypatch: pytest.MonkeyPatch) -> Table:
    monkeypatch.setenv("CASTABLE_BUCKET", table.store.bucket)  # type: ignore[attr-defined]
    monkeypatch.setenv("CASTABLE_DEAD_LETTER_PREFIX", "landing-failed/")
    return table


def test_ingest_appends_a_batch_in_one_commit_and_dead_letters_bad_files(
    ingest_env: Table, capsys: pytest.CaptureFixture[str]
) -> None:
    from lambdas import ingest

    t = ingest_env
    bucket = t.store.bucket  # type: ignore[attr-defined]
    for i in range(3):
        land(t, f"landing/events/day 1/part-{i}.parquet", events(1000 + 10 * i, 1010 + 10 * i))
    s3 = t.store.client  # type: ignore[attr-defined]
    s3.put_object(Bucket=bucket, Key="landing/events/corrupt.parquet", Body=b"not parquet")
    land(t, "landing/events/wrong.parquet", pa.table({"id": pa.array([1], pa.int32())}))
    keys = [f"landing/events/day 1/part-{i}.parquet" for i in range(3)] + [
        "landing/events/corrupt.parquet",
        "landing/events/wrong.parquet",
    ]
    event = sqs_event(bucket, keys, bodies=['{"Service":"Amazon S3","Event":"s3:TestEvent"}'])
    response = ingest.handler(event, Context())
    assert response == {"batchItemFailures": []}
    metrics = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    (document,) = [d for d in metrics if "RowsIngested" in d]
    assert document["table"] == t.uri.removeprefix("s3://").partition("/")[2], "the metrics name the table"
    assert ids(t) == [*range(10), *range(1000, 1030)]
    assert len(load_table(t.store).history()) == 3, "one commit for the whole batch"
    listing = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="landing")["Contents"]}
    assert listing == {
        "landing-failed/landing/events/corrupt.parquet",
        "landing-failed/landing/events/corrupt.parquet.reason.json",
        "landing-failed/landing/events/wrong.parquet",
        "landing-failed/landing/events/wrong.parquet.reason.json",
    }
    reason = s3.get_object(Bucket=bucket, Key="landing-failed/landing/events/wrong.parquet.reason.json")["Body"].read()
    assert b"id" in reason
    assert ingest.handler(event, Context()) == {"batchItemFailures": []}, "a duplicate delivery changes nothing"
    assert len(load_table(t.store).history()) == 3


@pytest.mark.parametrize("kind", ["snappy page", "page checksum"])
def test_ingest_dead_letters_a_file_whose_page_does_not_decode_and_appends_the_rest(
    ingest_env: Table, kind: str
) -> None:
    """The footer passes, so the bad page is found as the batch streams: that file goes to the
    dead-letter prefix and the others land in one commit."""
    from lambdas import ingest

    t = ingest_env
    bucket, s3 = t.store.bucket, t.store.client  # type: ignore[attr-defined]
    land(t, "landing/events/a.parquet", events(1000, 1010))
    s3.put_object(Bucket=bucket, Key="landing/events/bad.parquet", Body=damaged(events(5000, 15000), kind))
    land(t, "landing/events/b.parquet", events(2000, 2010))
    event = sqs_event(bucket, ["landing/events/a.parquet", "landing/events/bad.parquet", "landing/events/b.parquet"])
    before = len(load_table(t.store).history())
    assert ingest.handler(event, Context()) == {"batchItemFailures": []}
    assert ids(t) == [*range(10), *range(1000, 1010), *range(2000, 2010)]
    assert len(load_table(t.store).history()) == before + 1, "one commit for the good files"
    written = {o.key for o in t.store.list("data/")}
    stored = {f.path for f in load_table(t.store).manifest.data_files if f.inline is None}  # not those kept inline
    assert written == stored, "the failed stream left no file"
    listing = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="landing")["Contents"]}
    assert listing == {
        "landing-failed/landing/events/bad.parquet",
        "landing-failed/landing/events/bad.parquet.reason.json",
    }
    reason = s3.get_object(Bucket=bucket, Key="landing-failed/landing/events/bad.parquet.reason.json")["Body"].read()
    assert b"landing/events/bad.parquet does not decode" in reason and DAMAGES[kind].encode() in reason


def test_ingest_reports_transient_failures_for_retry(ingest_env: Table, monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.exceptions import ClientError

    from lambdas import ingest

    t = ingest_env
    bucket = t.store.bucket  # type: ignore[attr-defined]
    land(t, "landing/events/ok.parquet", events(2000, 2005))
    land(t, "landing/events/flaky.parquet", events(3000, 3005))
    real = ingest._s3()

    class Flaky:
        def __getattr__(self, name: str) -> object:
            return getattr(real, name)

        def get_object(self, **kwargs: str) -> object:
            if kwargs["Key"] == "landing/events/flaky.parquet":
                raise ClientError({"Error": {"Code": "InternalError"}}, "GetObject")
            return real.get_object(**kwargs)

    monkeypatch.setattr(ingest, "_s3", Flaky)
    event = sqs_event(bucket, ["landing/events/ok.parquet", "landing/events/flaky.parquet"], bodies=["not json"])
    response = ingest.handler(event, Context())
    assert sorted(f["itemIdentifier"] for f in response["batchItemFailures"]) == ["m1", "raw0"]
    assert ids(t) == [*range(10), *range(2000, 2005)]


def test_ingest_touches_nothing_outside_its_landing_prefix(ingest_env: Table) -> None:
    """Bucket-wide notifications pointed at the queue: the table's pointer, manifests and data
    files, another prefix and another bucket are skipped, never read, appended or deleted."""
    from lambdas import ingest

    t = ingest_env
    bucket = t.store.bucket  # type: ignore[attr-defined]
    s3 = t.store.client  # type: ignore[attr-defined]
    land(t, "elsewhere/x.parquet", events(5000, 5005))
    land(t, "landing-other/y.parquet", events(6000, 6005))
    before = {o["Key"]: o["ETag"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    table_keys = [f"{t.store.prefix}/{k}" for k in ("_latest_manifest", t.manifest.data_files[0].path)]  # type: ignore[attr-defined]
    keys = [*table_keys, "elsewhere/x.parquet", "landing-other/y.parquet", "landing/events/../events/_latest_manifest"]
    event = sqs_event(bucket, keys)
    event["Records"].append({**event["Records"][0], "messageId": "other-bucket"})
    event["Records"][-1]["body"] = event["Records"][-1]["body"].replace(f'"{bucket}"', '"someone-elses-bucket"')
    assert ingest.handler(event, Context()) == {"batchItemFailures": []}
    after = {o["Key"]: o["ETag"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    assert after == before, "nothing was copied, dead-lettered or deleted"
    assert ids(t) == list(range(10)) and load_table(t.store).version == t.version


def test_ingest_dead_letters_a_file_with_null_keys_from_its_footer(ingest_env: Table) -> None:
    """A landed file whose key column holds NULLs is refused from its footer alone, before any row is read."""
    from lambdas import ingest

    t = ingest_env
    bucket = t.store.bucket  # type: ignore[attr-defined]
    nullable = pa.schema(
        [pa.field("id", pa.int64()), pa.field("category", pa.string()), pa.field("value", pa.float64())]
    )
    land(
        t,
        "landing/events/nulls.parquet",
        pa.table({"id": [1, None], "category": ["a", "b"], "value": [1.0, 2.0]}, nullable),
    )
    assert ingest.handler(sqs_event(bucket, ["landing/events/nulls.parquet"]), Context()) == {"batchItemFailures": []}
    reason = t.store.client.get_object(  # type: ignore[attr-defined]
        Bucket=bucket, Key="landing-failed/landing/events/nulls.parquet.reason.json"
    )["Body"].read()
    assert b"holds NULLs" in reason and ids(t) == list(range(10))


def test_ingest_lands_csv_and_json_lines_as_the_table_types(ingest_env: Table) -> None:
    """CSV (a double written `1`, a string written `123`, a name in upper case), gzipped TSV and
    JSON Lines append in the batch's one commit; a _SUCCESS marker and a .crc are skipped; a CSV
    with a bad value and one with a NULL key are dead-lettered with the file, row and column in
    the reason, and append nothing."""
    from lambdas import ingest

    t = ingest_env
    bucket = t.store.bucket  # type: ignore[attr-defined]
    s3 = t.store.client  # type: ignore[attr-defined]
    files = {
        "landing/events/a.csv": b"id,category,value\n100,123,1\n101,,2.5\n",
        "landing/events/b.tsv.gz": gzip.compress(b"id\tcategory\tvalue\n102\tx\t3\n"),
        "landing/events/c.jsonl": b'{"id": 103, "category": "y", "value": 4}\n{"id": 104}\n',
        "landing/events/D.CSV": b"id,category,value\n105,z,5\n",
        "landing/events/_SUCCESS": b"",
        "landing/events/.part-0.parquet.crc": b"crc",
        "landing/events/bad.csv": b"id,category,value\n200,a,1\n201,b,one\n",
        "landing/events/nokey.csv": b"id,category,value\n300,a,1\n,b,2\n",
    }
    for key, body in files.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    assert ingest.handler(sqs_event(bucket, list(files)), Context()) == {"batchItemFailures": []}
    table = load_table(t.store)
    got = table.scan(filter="id >= 100").to_arrow().sort_by("id").to_pylist()
    assert got == [
        {"id": 100, "category": "123", "value": 1.0},
        {"id": 101, "category": None, "value": 2.5},
        {"id": 102, "category": "x", "value": 3.0},
        {"id": 103, "category": "y", "value": 4.0},
        {"id": 104, "category": None, "value": None},
        {"id": 105, "category": "z", "value": 5.0},
    ]
    assert table.version == t.version + 1, "one commit for the batch"
    reason = json.loads(
        s3.get_object(Bucket=bucket, Key="landing-failed/landing/events/bad.csv.reason.json")["Body"].read()
    )
    assert reason["reason"].startswith("landing/events/bad.csv, row 2, column 'value': 'one' is not double")
    nokey = s3.get_object(Bucket=bucket, Key="landing-failed/landing/events/nokey.csv.reason.json")["Body"].read()
    assert json.loads(nokey)["reason"] == "landing/events/nokey.csv: column 'id' is not nullable but has 1 nulls"
    left = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="landing/").get("Contents", [])}
    assert left == {"landing/events/_SUCCESS", "landing/events/.part-0.parquet.crc"}, (
        "what is not a data file is left alone"
    )


def test_ingest_appends_a_file_once_whatever_the_deliveries(ingest_env: Table, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same object twice in one batch, and an object another invocation already appended
    (its commit recorded the file's source id, but the file was not yet deleted): each file's
    rows land once."""
    from lambdas import ingest

    t = ingest_env
    bucket = t.store.bucket  # type: ignore[attr-defined]
    land(t, "landing/events/a.parquet", events(100, 105))
    assert ingest.handler(sqs_event(bucket, ["landing/events/a.parquet"] * 2), Context()) == {"batchItemFailures": []}
    assert ids(t) == [*range(10), *range(100, 105)]

    land(t, "landing/events/b.parquet", events(200, 205))
    land(t, "landing/events/c.parquet", events(300, 305))
    s3 = ingest._s3()
    with monkeypatch.context() as m:  # the first invocation dies after its commit, before deleting
        m.setattr(type(s3), "delete_object", lambda self, **kwargs: None)
        ingest.handler(sqs_event(bucket, ["landing/events/b.parquet"]), Context())
    assert ingest.handler(sqs_event(bucket, ["landing/events/b.parquet", "landing/events/c.parquet"]), Context()) == {
        "batchItemFailures": []
    }
    assert ids(t) == [*range(10), *range(100, 105), *range(200, 205), *range(300, 305)]
    assert not s3.list_objects_v2(Bucket=bucket, Prefix="landing/").get("Contents")


def test_ingest_upserts_a_change_feed_when_the_table_says_so(
    ingest_env: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table in upsert mode with an operation column: the landed files of one batch replace rows
    by key, the later file's change of a key wins, ``d`` rows delete their key; one commit."""
    from lambdas import ingest

    t = ingest_env
    t.set_properties({"ingest.mode": "upsert", "ingest.op-column": "op"})
    t = load_table(t.store)
    bucket = t.store.bucket  # type: ignore[attr-defined]
    first = events(2, 5).append_column("op", pa.array(["u", "d", "c"]))
    land(t, "landing/events/cdc/0001.parquet", first.set_column(2, "value", pa.array([20.0, 0.0, 40.0])))
    t.store.client.put_object(  # type: ignore[attr-defined]
        Bucket=bucket, Key="landing/events/cdc/0002.csv", Body=b"id,category,value,op\n4,z,41,u\n50,n,5,c\n9,,0,D\n"
    )
    land(t, "landing/events/cdc/plain.parquet", events(60, 61))  # no operation column: dead-lettered
    keys = ["landing/events/cdc/0001.parquet", "landing/events/cdc/0002.csv", "landing/events/cdc/plain.parquet"]
    assert ingest.handler(sqs_event(bucket, keys), Context()) == {"batchItemFailures": []}
    table = load_table(t.store)
    got = {r["id"]: (r["category"], r["value"]) for r in table.scan().to_arrow().to_pylist()}
    assert set(got) == {0, 1, 2, 4, 5, 6, 7, 8, 50}
    assert got[2] == ("c", 20.0) and got[4] == ("z", 41.0) and got[50] == ("n", 5.0)
    entry = table.history(limit=1)[0]
    assert entry.operation == "upsert" and table.version == t.version + 1
    reason = t.store.client.get_object(  # type: ignore[attr-defined]
        Bucket=bucket, Key="landing-failed/landing/events/cdc/plain.parquet.reason.json"
    )["Body"].read()
    assert b"op" in reason
    assert ingest.handler(sqs_event(bucket, keys[:2]), Context()) == {"batchItemFailures": []}
    assert load_table(t.store).version == table.version, "a duplicate delivery changes nothing"


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"ingest.mode": "merge"}, "append or upsert"),
        ({"ingest.op-column": "op"}, "needs ingest.mode=upsert"),
        ({"ingest.mode": "upsert", "ingest.schema-mode": "merge"}, "needs ingest.mode=append"),
        ({"ingest.mode": "upsert", "ingest.op-column": "id"}, "a column of the table"),
        ({"maintenance.schedule": "every day"}, "not rate"),
        ({"maintenance.scedule": "rate(1 day)"}, "did you mean 'maintenance.schedule'"),
    ],
)
def test_a_bad_ingest_or_maintenance_setting_is_refused_and_changes_nothing(
    ingest_env: Table, settings: dict[str, str], match: str
) -> None:
    before = snapshot_of(ingest_env.store)
    with pytest.raises(castable.InvalidInputError, match=match):
        ingest_env.set_properties(settings)
    assert snapshot_of(ingest_env.store) == before


@pytest.mark.parametrize("mode", ["strict", "merge"])
def test_ingest_new_columns_dead_letter_or_merge_per_table(
    ingest_env: Table, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """A landed file with a column the table lacks: ``strict`` dead-letters it; ``merge`` adds
    the column (one alter commit) and appends the batch, files without it reading NULL."""
    from lambdas import ingest

    t = ingest_env
    t.set_properties({"ingest.schema-mode": mode})
    bucket = t.store.bucket  # type: ignore[attr-defined]
    land(t, "landing/events/old.parquet", events(100, 102))
    land(t, "landing/events/new.parquet", events(200, 202).append_column("source", pa.array(["x", "y"])))
    assert ingest.handler(
        sqs_event(bucket, ["landing/events/old.parquet", "landing/events/new.parquet"]), Context()
    ) == {"batchItemFailures": []}
    fresh = load_table(t.store)
    if mode == "strict":
        assert "source" not in fresh.schema.names and ids(t) == [*range(10), 100, 101]
        reason = t.store.client.get_object(  # type: ignore[attr-defined]
            Bucket=bucket, Key="landing-failed/landing/events/new.parquet.reason.json"
        )["Body"].read()
        assert b"source" in reason
    else:
        assert fresh.schema.names[-1] == "source" and ids(t) == [*range(10), 100, 101, 200, 201]
        assert [h.operation for h in fresh.history(2)] == ["append", "alter"]
        got = {r["id"]: r["source"] for r in fresh.scan(["id", "source"]).to_arrow().to_pylist()}
        assert got[0] is None and got[101] is None and got[200] == "x"


LINES = pa.schema([pa.field("order_id", pa.int64(), nullable=False), pa.field("qty", pa.int64())])


@pytest.fixture
def db_ingest_env(s3_bucket: str, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> castable.Database:
    """A database with ``orders`` and ``lines`` whose ingest takes batch manifests from ``landing/``."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    db = castable.create_database(f"s3://{s3_bucket}/databases/shop")
    db.create_table("orders", EVENTS, primary_key="id")
    db.create_table("lines", LINES)
    monkeypatch.setenv("CASTABLE_BUCKET", s3_bucket)
    return db


def _land_batch(db: castable.Database, folder: str, manifest: object, files: dict[str, pa.Table]) -> str:
    s3, bucket = db.store.client, db.store.bucket  # type: ignore[attr-defined]
    for name, data in files.items():
        buf = io.BytesIO()
        pq.write_table(data, buf)
        s3.put_object(Bucket=bucket, Key=f"{folder}/{name}", Body=buf.getvalue())
    key = f"{folder}/batch.manifest.json"
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(manifest).encode())
    return key


def test_ingest_appends_a_manifests_files_to_several_tables_in_one_commit(db_ingest_env: castable.Database) -> None:
    from lambdas import ingest

    db = db_ingest_env
    bucket, s3 = db.store.bucket, db.store.client  # type: ignore[attr-defined]
    orders, lines = events(1, 3), pa.table({"order_id": [1, 1, 2], "qty": [5, 6, 7]}, schema=LINES)
    files = {"orders.parquet": orders, "lines.parquet": lines}
    key = _land_batch(
        db, "landing/shop/b1", {"tables": {"orders": ["orders.parquet"], "lines": ["lines.parquet"]}}, files
    )
    before = db.version
    early = sqs_event(bucket, ["landing/shop/b1/orders.parquet"])
    assert ingest.handler(early, Context()) == {"batchItemFailures": []}
    assert db.refresh().version == before, "a data file waits for its manifest"
    event = sqs_event(bucket, [key, "landing/shop/b1/lines.parquet"])
    assert ingest.handler(event, Context()) == {"batchItemFailures": []}
    assert db.refresh().version == before + 1, "one commit for both tables"
    snap = db.snapshot()
    assert snap.table("orders").count() == 2 and snap.table("lines").count() == 3
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="landing/")
    assert ingest.handler(event, Context()) == {"batchItemFailures": []}, "a duplicate delivery changes nothing"
    assert db.refresh().version == before + 1


@pytest.mark.parametrize(
    ("manifest", "reason"),
    [
        ({"tables": {"orders": ["orders.parquet"], "nope": ["lines.parquet"]}}, "has no table 'nope'"),
        ({"tables": {"orders": ["orders.parquet"], "../x": ["lines.parquet"]}}, "not a table name"),
        ({"tables": {"orders": ["../../elsewhere.parquet"]}}, "outside the landing prefix"),
        ({"tables": {"orders": ["orders.parquet"], "lines": ["missing.parquet"]}}, "does not exist"),
        ({"tables": {"orders": ["orders.parquet"], "lines": ["orders.parquet"]}}, "does not match the table"),
        ({"files": ["orders.parquet"]}, "not a batch manifest"),
    ],
)
def test_ingest_dead_letters_a_bad_manifest_and_commits_none_of_it(
    db_ingest_env: castable.Database, manifest: object, reason: str
) -> None:
    from lambdas import ingest

    db = db_ingest_env
    bucket, s3 = db.store.bucket, db.store.client  # type: ignore[attr-defined]
    key = _land_batch(db, "landing/shop/b2", manifest, {"orders.parquet": events(1, 3)})
    before = snapshot_of(db.store)
    assert ingest.handler(sqs_event(bucket, [key]), Context()) == {"batchItemFailures": []}
    assert snapshot_of(db.store) == before, "nothing committed to any table"
    why = s3.get_object(Bucket=bucket, Key=f"landing-failed/{key}.reason.json")["Body"].read().decode()
    assert reason in why, why


def test_ingest_dead_letters_a_manifest_whose_file_does_not_decode(db_ingest_env: castable.Database) -> None:
    from lambdas import ingest

    db = db_ingest_env
    bucket, s3 = db.store.bucket, db.store.client  # type: ignore[attr-defined]
    lines = pa.table({"order_id": [1, 1, 2], "qty": [5, 6, 7]}, schema=LINES)
    manifest = {"tables": {"lines": ["lines.parquet"], "orders": ["orders.parquet"]}}
    key = _land_batch(db, "landing/shop/b3", manifest, {"lines.parquet": lines})
    s3.put_object(Bucket=bucket, Key="landing/shop/b3/orders.parquet", Body=damaged(events(0, 10_000), "page checksum"))
    before = snapshot_of(db.store)
    assert ingest.handler(sqs_event(bucket, [key]), Context()) == {"batchItemFailures": []}
    assert snapshot_of(db.store) == before, "nothing committed to any table"
    why = s3.get_object(Bucket=bucket, Key=f"landing-failed/{key}.reason.json")["Body"].read().decode()
    assert "landing/shop/b3/orders.parquet does not decode" in why, why
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="landing/"), "all moved to landing-failed/"


def test_execution_names_fit_step_functions_and_stay_apart() -> None:
    """A maintenance run's name as Step Functions takes it (at most 80 of [0-9a-zA-Z-_]), the same
    wherever it is made (a retried start names it alike), distinct for two keys or two tags."""
    from castable.deployment.names import execution_name

    long_db, long_member = "d" * 128, "m" * 128
    keys = ["events", "shop/orders", f"{long_db}/{long_member}", f"{long_db}/{long_member[:-1]}x"]
    names = [execution_name(k, "202611290130") for k in keys]
    assert names[:2] == ["events-202611290130", "shop--orders-202611290130"]
    assert all(len(n) <= 80 and re.fullmatch(r"[0-9a-zA-Z\-_]+", n) for n in names)
    assert len(set(names)) == len(names), "two long keys that share their start still differ"
    assert execution_name(keys[2], "tombstones-1") != execution_name(keys[2], "tombstones-2")


MALFORMED = [
    "not json",
    "[1, 2]",
    '{"detail-type": "Object Created", "detail": {"bucket": {"name": "bkt"}}}',
    '{"detail-type": "Object Created", "detail": {"bucket": {"name": "bkt"}, "object": {"key": 7}}}',
    '{"detail-type": "Object Created", "detail": "tables/events/tombstone/x.del"}',
]
"""Message bodies that are no S3 event as EventBridge sends it."""
OTHER_EVENTS = ['{"Service": "Amazon S3", "Event": "s3:TestEvent"}', '{"detail-type": "Object Deleted", "detail": {}}']
"""Bodies of events that are not an object created: ignored."""


def test_a_batch_reads_each_objects_key_as_eventbridge_sends_it_and_each_bad_message_alone() -> None:
    """Each message of a batch on its own: an object created (its key as S3 spells it, nothing
    URL-decoded: EventBridge does not encode it), a malformed message with its problem, and
    another event left out; a record that is no SQS record fails the batch's event."""
    from lambdas.events import Created, Malformed, Messages, read

    keys = ["landing/events/day 1/a+b.parquet", "landing/events/c%2Bd.parquet", "tables/événements/manifest/v1.json"]
    found = list(read(Messages.model_validate(sqs_event("bkt", keys, bodies=[*OTHER_EVENTS, "not json"]))))
    assert found[:3] == [Created(f"m{i}", "bkt", key) for i, key in enumerate(keys)]
    assert len(found) == 4 and isinstance(found[3], Malformed) and found[3].message_id == "raw2"
    broken = sqs_event("bkt", keys)
    del broken["Records"][1]["messageId"]
    with pytest.raises(InvalidEventError, match=r"Records\.1\.messageId"):
        parse(Messages, broken)


def test_the_trigger_knows_database_members_by_their_path() -> None:
    from lambdas import trigger
    from lambdas.events import Messages

    keys = ["tables/events/tombstone/2026/x.del", "databases/shop/orders/tombstone/2026/y.del", "databases/shop/_x"]
    keys += ["databases/shop/_database/tombstone/z.del", "tables/events/data/2026/x.parquet", "tables/tombstone/x.del"]
    assert trigger.tables_in(Messages.model_validate(sqs_event("bkt", keys))) == {
        "events": "s3://bkt/tables/events",
        "shop/orders": "s3://bkt/databases/shop/orders",
    }


def test_the_trigger_skips_a_malformed_message_and_starts_the_batchs_other_tables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The trigger reports no batch failures: a message that is no S3 event is logged, counted and
    skipped, and the other messages' tables are found (before, one such message failed the batch)."""
    from lambdas import trigger
    from lambdas.events import Messages

    warned: list[dict[str, Any]] = []
    monkeypatch.setattr(trigger.logger, "warning", lambda msg, extra: warned.append(extra))
    event = sqs_event("bkt", ["tables/events/tombstone/2026/x.del"], bodies=MALFORMED + OTHER_EVENTS)
    assert trigger.tables_in(Messages.model_validate(event)) == {"events": "s3://bkt/tables/events"}
    assert [w["message_id"] for w in warned] == [f"raw{i}" for i in range(len(MALFORMED))]
    assert "not JSON" in warned[0]["error"] and "detail.object" in warned[2]["error"]
    with pytest.raises(InvalidEventError, match="Records"):
        trigger.handler({"records": []}, Context())


def test_the_catalog_function_publishes_each_table_once_a_batch_and_knows_members_by_their_path() -> None:
    from castable.deployment.layout import table_uri
    from castable.deployment.names import glue_table_name
    from lambdas import catalog
    from lambdas.events import Messages

    keys = [
        "tables/events/manifest/v00000000000000000001.json",
        "tables/events/manifest/v00000000000000000002.json",
        "databases/shop/orders/manifest/v00000000000000000001.json",
        "databases/shop/_database/manifest/v00000000000000000001.json",
        "tables/events/data/2026/x.parquet",
        "tables/events/manifest/nested/v3.json",
    ]
    event = Messages.model_validate(sqs_event("bkt", keys))
    assert catalog.committed(event) == ({("bkt", "events"): ["m0", "m1"], ("bkt", "shop/orders"): ["m2"]}, [])
    assert table_uri("bkt", "shop/orders") == "s3://bkt/databases/shop/orders"
    assert table_uri("bkt", "events") == "s3://bkt/tables/events"
    assert [glue_table_name(k) for k in ("events", "shop/orders", "Web-Logs.v2")] == [
        "events",
        "shop__orders",
        "web_logs_v2",
    ]


def test_the_catalog_function_returns_a_malformed_message_as_a_failure() -> None:
    """A message that is no S3 event is the batch's failure alone (SQS delivers it again, then
    keeps it in the dead letters); another event is taken and ignored; the batch does not fail."""
    from lambdas import catalog

    result = catalog.handler(sqs_event("bkt", [], bodies=MALFORMED + OTHER_EVENTS), Context())
    assert result == {
        "batchItemFailures": [{"itemIdentifier": f"raw{i}"} for i in range(len(MALFORMED))],
        "published": [],
        "skipped": [],
    }


def test_the_catalog_function_retries_only_the_table_that_failed(
    s3_bucket: str, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's tables are published one by one: one that cannot be published (a nested column)
    comes back as the batch's failures, for SQS to deliver again; the others are registered."""
    from lambdas import catalog

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("GLUE_DATABASE", "catalog_retries")
    monkeypatch.setenv(AFTER_COMMIT, "false")
    glue = boto3.client("glue", region_name="us-east-1")
    with contextlib.suppress(glue.exceptions.AlreadyExistsException):
        glue.create_database(DatabaseInput={"Name": "catalog_retries"})
    on = {"publish.iceberg": True}
    good = castable.create_table(f"s3://{s3_bucket}/tables/good", EVENTS, primary_key="id", properties=on)
    good.append(events(0, 5))
    nested = pa.schema([pa.field("id", pa.int64(), nullable=False), ("tags", pa.list_(pa.string()))])
    bad = castable.create_table(f"s3://{s3_bucket}/tables/bad", nested, primary_key="id", properties=on)
    bad.append(pa.table({"id": [1], "tags": [["x"]]}, schema=nested))
    keys = ["tables/bad/manifest/v00000000000000000001.json", "tables/good/manifest/v00000000000000000001.json"]
    result = catalog.handler(sqs_event(s3_bucket, keys), Context())
    assert result["batchItemFailures"] == [{"itemIdentifier": "m0"}]
    assert [p["table"] for p in result["published"]] == ["good"]
    held = glue.get_table(DatabaseName="catalog_retries", Name="good")["Table"]["Parameters"]["metadata_location"]
    assert held == f"{good.uri}/metadata/v1.metadata.json"


def test_commit_registers_files_in_a_database_member_through_its_log(db_ingest_env: castable.Database) -> None:
    db = db_ingest_env
    orders = db.table("orders")
    files = [upload(orders, f"data/emr/run-9/part-{i}.parquet", events(10 * i, 10 * i + 5)) for i in range(2)]
    before = db.version
    result = commit.handler({"table": orders.uri, "files": files, "commit_id": "emr-run-9"}, Context())
    assert result["version"] == 1 and db.refresh().version == before + 1
    assert db.history(limit=1)[0].commit_id == "emr-run-9"
    assert db.snapshot().table("orders").count() == 10


def test_maintenance_coalesce_with_a_commit_id_commits_once(
    s3_bucket: str, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The maintenance workflow passes ``<execution>/coalesce``: a retried step commits nothing twice."""
    from lambdas import maintenance

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    table = castable.create_table(f"s3://{s3_bucket}/t", EVENTS, primary_key="id")
    table.append(events(0, 3000))
    table.delete("id = 5")
    table.delete("id = 2500")
    step = {"action": "coalesce", "table": table.uri, "commit_id": "exec-1/coalesce"}
    first = maintenance.handler(step, Context())
    assert first["tombstones_coalesced"] == 2
    version = table.refresh().version
    assert table.manifest.recent_commits["exec-1/coalesce"] == version
    maintenance.handler(step, Context())
    assert table.refresh().version == version


def test_commit_with_file_lists_over_a_lossy_network(table: Table) -> None:
    """Jobs' file lists committed by the function while S3 loses 15% of its write answers after
    applying them, answers 5% of requests 503 and breaks 5% of GETs mid-body: each commit lands
    once, a duplicate delivery commits nothing, and every row is there once."""
    props = TableProperties.parse(table.properties)
    with network(Faults(lose=0.15, slow_down=0.05, reset_body=0.05, seed=7)) as injected:
        before = dict(injected)
        for run in range(6):
            parts = [events(1000 * run + 100 * i, 1000 * run + 100 * i + 50).to_batches()[0] for i in range(4)]
            entries = write_data_files(table.store, parts, table.schema, props)
            listed = write_file_list(table.store, f"emr-lossy-{run}", entries, table.schema)
            event = {"table": table.uri, "file_list": listed, "commit_id": f"emr-lossy-{run}", "verify": "footer"}
            result = commit.handler(event, Context())
            assert commit.handler(event, Context())["version"] == result["version"], "a redelivery commits nothing"
    assert injected["lose"] > before.get("lose", 0)
    after = load_table(table.store)
    assert after.version == 7
    expected = [*range(10), *(1000 * r + 100 * i + k for r in range(6) for i in range(4) for k in range(50))]
    assert ids(table) == sorted(expected)


def test_commit_takes_a_file_list_written_before_a_concurrent_add_columns(table: Table) -> None:
    """A job's file list written under the schema it started with commits after another writer
    added a nullable column; its rows read the column as NULL."""
    props = TableProperties.parse(table.properties)
    entries = write_data_files(table.store, events(500, 540).to_batches(), table.schema, props)
    listed = write_file_list(table.store, "emr-run-old-schema", entries, table.schema)
    table.add_columns([pa.field("note", pa.string())])
    event = {"table": table.uri, "file_list": listed, "commit_id": "emr-run-old-schema", "verify": "footer"}
    assert commit.handler(event, Context())["summary"]["rows_added"] == 40
    rows = load_table(table.store).scan(filter="id >= 500").to_arrow()
    assert rows.num_rows == 40 and rows["note"].null_count == 40


def test_one_batch_for_fifty_busy_tables_commits_once_to_each_whatever_one_floods(
    s3_bucket: str, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shared function's side of fair sharing: a batch mixing 50 tables' files (one of them
    flooding it with 100 files, a third of them bad) lands every table's files in one commit of
    its own; the flood costs the others no commit, no retry and no row. (Which messages SQS
    hands out first is the fair queue's part, which moto does not model: the route function's
    test checks each message carries its table as group.)"""
    from lambdas import ingest

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("CASTABLE_BUCKET", s3_bucket)
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    tables = {f"busy{i:02d}": castable.create_table(f"s3://{s3_bucket}/tables/busy{i:02d}", EVENTS) for i in range(50)}
    keys = []
    for i in range(100):
        key = f"landing/busy00/flood-{i:03d}.parquet"
        body = b"not parquet" if i % 3 == 0 else parquet_bytes(events(1000 * i, 1000 * i + 2))
        s3.put_object(Bucket=s3_bucket, Key=key, Body=body)
        keys.append(key)
    for n, name in enumerate(sorted(tables)[1:], start=1):
        key = f"landing/{name}/part.parquet"
        s3.put_object(Bucket=s3_bucket, Key=key, Body=parquet_bytes(events(n, n + 1)))
        keys.insert(2 * n, key)
    assert ingest.handler(sqs_event(s3_bucket, keys), Context()) == {"batchItemFailures": []}
    for n, (name, table) in enumerate(sorted(tables.items())):
        fresh = load_table(table.store)
        assert fresh.version == 1, f"{name}: one commit"
        expected = 2 * len([i for i in range(100) if i % 3]) if n == 0 else 1
        assert fresh.count() == expected, name
    failed = s3.list_objects_v2(Bucket=s3_bucket, Prefix="landing-failed/")["KeyCount"]
    assert failed == 2 * len([i for i in range(100) if i % 3 == 0])
