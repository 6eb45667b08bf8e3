"""Every write knows its own outcome when the network loses an answer (issue 49, DESIGN section 2).

S3 applies a PUT and its answer is lost; botocore sends the request again, and a conditional
PUT repeated so answers 412. The faults are injected in the SDK's send (``helpers.lossy``),
below botocore's retries, as a reset connection does in production.
"""

from __future__ import annotations

import pytest
from helpers.lossy import losing
from helpers.s3servers import new_bucket
from helpers.tables import EVENTS, FILES_ONLY, events

import castable
from castable.store import PreconditionFailedError, S3Store, StoreUnavailableError, make_s3_client
from castable.store.probe import PROBE_PREFIX


def _put(method: str, url: str, part: str) -> bool:
    return method == "PUT" and part in url


def test_a_put_if_absent_whose_answer_was_lost_is_the_writers_own(s3_endpoint: str) -> None:
    store = S3Store(new_bucket(s3_endpoint), "t", make_s3_client({"endpoint_url": s3_endpoint}))
    with losing(lambda m, u: _put(m, u, "/t/a")) as injected:
        before = injected["lose"]
        info = store.put("a", b"mine", if_none_match=True)
    assert injected["lose"] == before + 1, "the answer was lost and the SDK sent the PUT again"
    assert info.etag == store.head("a").etag
    with pytest.raises(PreconditionFailedError):  # another writer's bytes: a real loss
        store.put("a", b"theirs", if_none_match=True)


def test_a_compare_and_swap_whose_answer_was_lost_succeeded(s3_endpoint: str) -> None:
    store = S3Store(new_bucket(s3_endpoint), "t", make_s3_client({"endpoint_url": s3_endpoint}))
    first = store.put("p", b"1", if_none_match=True)
    with losing(lambda m, u: _put(m, u, "/t/p")):
        second = store.put("p", b"2", if_match=first.etag)
    assert store.get("p").data == b"2" and second.etag == store.head("p").etag
    with pytest.raises(PreconditionFailedError):
        store.put("p", b"3", if_match=first.etag)


def test_a_completed_multipart_upload_whose_answer_was_lost_is_the_writers_own(s3_endpoint: str) -> None:
    store = S3Store(new_bucket(s3_endpoint), "t", make_s3_client({"endpoint_url": s3_endpoint}))
    upload = store.create_multipart("big")
    parts = [store.upload_part("big", upload, 1, b"x" * (5 * 1024 * 1024)), store.upload_part("big", upload, 2, b"y")]
    with losing(lambda m, u: m == "POST" and "uploadId" in u) as injected:
        before = injected["lose"]
        info = store.complete_multipart("big", upload, parts)
    assert injected["lose"] == before + 1
    assert info.etag == store.head("big").etag and info.size == 5 * 1024 * 1024 + 1


@pytest.mark.parametrize("max_attempts", [None, 2])
def test_a_get_whose_connection_breaks_mid_body_is_read_again_within_the_retry_budget(
    s3_endpoint: str, max_attempts: int | None
) -> None:
    """The SDK retries a request until its headers; the body gets the same budget on top (the
    default one, or the ``max_attempts`` the user set), and past it the error is castable's."""
    options: dict[str, object] = {"endpoint_url": s3_endpoint}
    if max_attempts is not None:
        options["max_attempts"] = max_attempts
    store = S3Store(new_bucket(s3_endpoint), "t", make_s3_client(options))
    store.put("g", b"body")
    budget = (max_attempts or 8) + 1  # botocore's max_attempts counts the retries after the first send
    with losing(lambda m, u: m == "GET" and "/t/g" in u, times=budget - 1, kind="reset_body") as injected:
        before = injected["reset_body"]
        assert store.get("g").data == b"body"
    assert injected["reset_body"] == before + budget - 1
    with (
        losing(lambda m, u: m == "GET" and "/t/g" in u, times=budget, kind="reset_body"),
        pytest.raises(StoreUnavailableError, match="reading from response stream"),
    ):
        store.get("g")
    assert store.get("g").data == b"body"


@pytest.mark.parametrize("part", ["/data/", "/manifest/", "_latest_manifest", "/tombstone/"])
def test_a_commit_whose_write_answer_was_lost_lands_once(s3_endpoint: str, part: str) -> None:
    """A data file, the manifest (the commit point), the pointer or a tombstone: the write's
    answer is lost, the write succeeds, and the table holds it exactly once."""
    options = {"endpoint_url": s3_endpoint}
    uri = f"s3://{new_bucket(s3_endpoint)}/t"
    table = castable.create_table(uri, EVENTS, primary_key="id", storage_options=options, properties=FILES_ONLY)
    table.append(events(0, 10))
    with losing(lambda m, u: _put(m, u, part)) as injected:
        before = injected["lose"]
        table.append(events(10, 20), commit_id="a")
        table.delete("id IN (3, 4)", commit_id="d")
    assert injected["lose"] == before + 1
    again = castable.open_table(uri, storage_options=options)
    assert sorted(again.scan().to_arrow()["id"].to_pylist()) == [i for i in range(20) if i not in (3, 4)]
    assert [h.commit_id for h in again.history()][:2] == ["d", "a"]
    assert again.version == 3


def test_a_lost_answer_during_the_store_probe_does_not_condemn_the_store(s3_endpoint: str) -> None:
    """The probe's own PUTs lose their answers: castable neither calls the store unsafe nor
    remembers a verdict formed from them, and every commit of the process goes through."""
    options = {"endpoint_url": s3_endpoint}
    uri = f"s3://{new_bucket(s3_endpoint)}/t"
    with losing(lambda m, u: _put(m, u, PROBE_PREFIX), times=2) as injected:
        before = injected["lose"]
        table = castable.create_table(uri, EVENTS, storage_options=options)
        table.append(events(0, 5))
    assert injected["lose"] == before + 2, "the probe's two PUTs that succeed (create, If-Match) lost their answers"
    assert castable.open_table(uri, storage_options=options).scan().count() == 5
