"""Writers, compaction, gc and the ingest function, all at once in separate processes on moto
over HTTP, with default settings: the ingest function gets valid, invalid, misrouted and
redelivered messages. No row is lost or landed twice, nothing outside the landing prefix
changes, and every retained version stays readable; also over a lossy network (write answers
lost after S3 applied them, SlowDown, GETs broken mid-body: ``helpers.lossy``)."""

from __future__ import annotations

import io
import json
from concurrent.futures import Future
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pyarrow.parquet as pq
import pytest
from helpers.lossy import Faults, run_lossy
from helpers.processes import process_pool
from helpers.s3servers import new_bucket
from helpers.tables import EVENTS, events
from helpers.workers import append_blocks, ingest_batches, maintain_and_read

import castable
from castable.commit.pointer import read_pointer

LOAD_SECONDS = 34.0
"""How long the writers and the ingest processes keep going at least (see ``swept`` below)."""
GRACE_SECONDS = 30.0
"""gc's ``orphan_grace``, given as a user would: the default (a day) would sweep nothing in a
test. It must exceed the longest upload-to-commit time (checked below), and be short enough
that files compacted away early in the run are swept while the others still write."""
RETAIN_VERSIONS = 10
PAUSE_SECONDS = 0.2
"""Between a writer's appends."""
SEED = (0, 5_000)  # enough rows for a data file (a small write would be kept inline): a message names it below


def _listing(s3: object, bucket: str, prefix: str = "") -> dict[str, str]:
    """Every key under ``prefix`` and its ETag."""
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)  # type: ignore[attr-defined]
    return {o["Key"]: o["ETag"] for page in pages for o in page.get("Contents", [])}


def _parquet(start: int, stop: int) -> bytes:
    buf = io.BytesIO()
    pq.write_table(events(start, stop), buf)
    return buf.getvalue()


NETWORKS = {"reliable": None, "lossy": Faults(lose=0.15, slow_down=0.05, reset_body=0.05, slow=0.01)}


@pytest.mark.slow
@pytest.mark.parametrize("network", NETWORKS)
def test_writers_maintenance_and_ingest_with_bad_and_misrouted_messages(
    s3_endpoint: str, tmp_path: Path, network: str
) -> None:
    options = {"endpoint_url": s3_endpoint, "region": "us-east-1"}
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    bucket, other_bucket = new_bucket(s3_endpoint), new_bucket(s3_endpoint)
    uri = f"s3://{bucket}/tables/t"
    table = castable.create_table(uri, EVENTS, primary_key="id", storage_options=options)
    table.append(events(*SEED), commit_id="seed")

    # Objects the ingest function must never touch, some of them named by misrouted messages.
    untouchable = {
        (bucket, "elsewhere/x.parquet"): _parquet(70_000_000, 70_000_005),
        (bucket, "landing-other/y.parquet"): _parquet(71_000_000, 71_000_005),
        (bucket, "sentinel/notes.txt"): b"leave me alone",
        (other_bucket, "landing/foreign.parquet"): _parquet(72_000_000, 72_000_005),
        (other_bucket, "tables/t/_latest_manifest"): b"not this table's pointer",
    }
    for (b, key), body in untouchable.items():
        s3.put_object(Bucket=b, Key=key, Body=body)
    pointer_key, data_key = "tables/t/_latest_manifest", f"tables/t/{table.manifest.data_files[0].path}"
    misrouted = [
        *untouchable,
        (bucket, pointer_key),
        (bucket, data_key),
        (bucket, "landing/../tables/t/_latest_manifest"),
        (bucket, "landing-failed/elsewhere.parquet"),
    ]

    def outside() -> dict[tuple[str, str], str]:
        """Everything the ingest function may not change: the other bucket, and this bucket
        apart from the landing prefix, its dead-letter prefix and the table (which the writers,
        the maintenance and the ingest commits legitimately change)."""
        mine = _listing(s3, bucket)
        kept = {
            (bucket, k): e for k, e in mine.items() if not k.startswith(("landing/", "landing-failed/", "tables/t/"))
        }
        return kept | {(other_bucket, k): e for k, e in _listing(s3, other_bucket).items()}

    before = outside()
    assert set(before) == set(untouchable)

    # The load lasts LOAD_SECONDS and then until gc has swept once (on a slow machine the first
    # sweep comes later), so the sweep always meets writers and ingest still at work.
    swept = str(tmp_path / "swept")
    faults = NETWORKS[network]
    with process_pool(5) as pool:

        def submit(fn: Any, *args: Any) -> Future[Any]:
            return pool.submit(fn, *args) if faults is None else pool.submit(run_lossy, faults, fn, *args)

        def result(future: Future[Any]) -> Any:
            return future.result(timeout=300) if faults is None else future.result(timeout=300)[0]

        keeper = submit(maintain_and_read, uri, options, LOAD_SECONDS + 4, GRACE_SECONDS, RETAIN_VERSIONS, swept)
        writers = [submit(append_blocks, uri, options, w, LOAD_SECONDS, PAUSE_SECONDS, swept) for w in range(2)]
        ingesters = [
            submit(ingest_batches, s3_endpoint, uri, bucket, k, LOAD_SECONDS, misrouted, swept) for k in range(2)
        ]
        wrote = [result(f) for f in writers]
        ingested = [result(f) for f in ingesters]
        # The premise of the grace period, checked before maintenance's outcome: no write took
        # longer than it from upload to commit (moto's modification times are whole seconds,
        # hence the second of slack). A slower write could lose its file to gc by design.
        slowest = max(r["max_seconds"] for r in wrote + ingested)
        assert slowest < GRACE_SECONDS - 1, f"a write took {slowest:.1f} s: the grace period no longer protects it"
        maintained = result(keeper)

    # The load was real: maintenance compacted, expired and swept while writers and ingest ran.
    busy_until = min(r["end"] for r in wrote + ingested)
    assert any(t < busy_until for t, _ in maintained["compactions"]), maintained
    assert maintained["expired"] >= 1, maintained
    assert any(t < busy_until for t in maintained["sweeps"]), f"gc swept nothing during the load: {maintained}"
    assert maintained["versions_read"] >= 1
    assert all(r["batches"] >= 3 for r in ingested), "every kind of bad file was delivered"
    assert all(r["responses"] and all(resp == {"batchItemFailures": []} for resp in r["responses"]) for r in ingested)
    for r in wrote:
        assert all(retried == version for version, retried in r["retries"]), "a retried commit id committed twice"

    # No row lost, none twice: exactly the seed, the writers' ids and the valid landed files' ids.
    expected = set(range(*SEED))
    for r in wrote:
        expected |= {i for start, stop in r["ranges"] for i in range(start, stop)}
    for r in ingested:
        expected |= {i for start, stop in r["valid"].values() for i in range(start, stop)}
    table = castable.open_table(uri, storage_options=options)
    got = table.scan(["id"]).to_arrow().column("id").to_pylist()
    assert len(got) == len(set(got)), f"{len(got) - len(set(got))} rows landed twice"
    assert set(got) == expected, f"lost: {sorted(expected - set(got))[:10]} extra: {sorted(set(got) - expected)[:10]}"

    # Every landed file was consumed: valid ones appended and removed, bad ones dead-lettered
    # with their reason, and nothing else was dead-lettered.
    assert _listing(s3, bucket, "landing/") == {}, "landed files left behind"
    bad = {key: why for r in ingested for key, why in r["bad"].items()}
    dead = _listing(s3, bucket, "landing-failed/")
    assert set(dead) == {f"landing-failed/{k}{suffix}" for k in bad for suffix in ("", ".reason.json")}
    for key, why in bad.items():
        reason = json.loads(s3.get_object(Bucket=bucket, Key=f"landing-failed/{key}.reason.json")["Body"].read())
        assert reason["source"] == key and why.lower() in reason["reason"].lower(), reason

    # Nothing outside the landing prefix changed; the table's own objects named by misrouted
    # messages are still there (the data file unless maintenance's gc swept it, as it may).
    assert outside() == before, "an object outside the landing prefix was created, changed or deleted"
    assert read_pointer(table.store).version == table.version
    assert (
        data_key in _listing(s3, bucket, "tables/t/data/")
        or data_key.removeprefix("tables/t/") in (maintained["swept"])
    )

    # Every retained version is readable, dense, holds no id twice, and keeps every row of the
    # one before it (the load only appends and compacts); also once gc has swept all it may.
    history = table.history()
    versions = [h.version for h in history]
    assert versions == list(range(table.version, table.version - len(versions), -1))
    assert len(versions) >= min(RETAIN_VERSIONS, table.version + 1)
    for sweep in (None, timedelta(0)):
        if sweep is not None:
            table.gc(orphan_grace=sweep)  # nothing writes any more, so no grace is needed
        newer: set[int] | None = None
        for version in versions:
            ids = table.scan(["id"], version=version).to_arrow().column("id").to_pylist()
            assert len(ids) == len(set(ids)), f"version {version} holds an id twice"
            assert newer is None or set(ids) <= newer, f"version {version + 1} lost rows of version {version}"
            newer = set(ids)
        assert newer is not None
        assert sorted(table.scan(["id"]).to_arrow().column("id").to_pylist()) == sorted(expected)
