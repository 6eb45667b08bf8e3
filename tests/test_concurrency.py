"""Several processes committing at once against each store: nothing lost, nothing twice."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import pytest
from conftest import EVENTS
from workers import append_and_delete, expected_ids

import castable
from castable.commit import read_pointer
from castable.layout import version_of_manifest_key

WORKERS = 8
ROUNDS = 3


@pytest.mark.slow
def test_many_processes_append_and_delete(table_uri: tuple[str, dict | None]) -> None:
    uri, options = table_uri
    castable.create_table(
        uri, EVENTS, primary_key="id", properties={"commit.max-attempts": 200}, storage_options=options
    )
    with ProcessPoolExecutor(WORKERS, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(append_and_delete, uri, options, w, ROUNDS) for w in range(WORKERS)]
        results = [f.result(timeout=600) for f in futures]

    table = castable.open_table(uri, storage_options=options)
    got = table.scan(["id"]).to_arrow().column("id").to_pylist()
    assert len(got) == len(set(got)), "an append landed twice"
    expected = set().union(*(expected_ids(w, ROUNDS) for w in range(WORKERS)))
    assert set(got) == expected, f"lost: {sorted(expected - set(got))[:10]} extra: {sorted(set(got) - expected)[:10]}"

    commits = [c for r in results for c in r]
    versions = [v for _, v, _ in commits]
    assert len(set(versions)) == len(versions) == WORKERS * ROUNDS * 3, "every commit has its own version"

    manifests = sorted(version_of_manifest_key(i.key) for i in table.store.list("manifest/"))
    assert manifests == list(range(len(commits) + 1)), "versions are dense"
    assert read_pointer(table.store).version == len(commits), "the pointer ends at the last version"

    history = table.history()
    assert len(history) == len(commits) + 1
    by_id = {h.commit_id: h for h in history}
    for op, version, commit_id in commits:
        assert by_id[commit_id].version == version and by_id[commit_id].operation == op
