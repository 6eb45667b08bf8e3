"""The object-store contract, run against the local directory and S3 over HTTP alike.

The tests here need a server, a JVM, a side venv or minutes; the rest are the unit tier's
(tests/unit/store/test_store.py)."""

from __future__ import annotations

import pytest

from castable.store import (
    PreconditionFailedError,
)


@pytest.mark.s3
def test_racing_put_if_absent_has_one_winner_on_the_test_s3(s3_bucket: str, s3_options: dict[str, str]) -> None:
    """The harness itself: moto's conditional writes are made atomic (tests/helpers/s3servers.py), so
    of several racing ``If-None-Match: *`` PUTs of one key exactly one succeeds, as on S3."""
    from concurrent.futures import ThreadPoolExecutor

    from castable.store import S3Store, make_s3_client

    store = S3Store(s3_bucket, "race", make_s3_client(s3_options))

    def put(key: str, writer: int) -> bool:
        try:
            store.put(key, f"writer {writer}".encode(), if_none_match=True)
        except PreconditionFailedError:
            return False
        return True

    with ThreadPoolExecutor(8) as pool:
        for k in range(20):
            wins = list(pool.map(put, [f"k{k}"] * 8, range(8)))
            assert wins.count(True) == 1, f"key k{k}: {wins.count(True)} writers won"
