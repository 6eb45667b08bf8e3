"""Shared fixtures: a moto S3 server on 127.0.0.1 (real HTTP) and a store per backend."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
import pytest

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.pop("AWS_PROFILE", None)

from s3servers import localstack_s3, moto_s3, s3rver

from castable.store import LocalStore, ObjectStore, S3Store, make_s3_client
from castable.tables import load_table


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server on loopback for the whole session (conditional writes made atomic, as
    on S3); yields its endpoint URL."""
    with moto_s3() as endpoint:
        yield endpoint


ROOT = Path(__file__).resolve().parent.parent
LOCALSTACK_PYTHON = Path(os.environ.get("CASTABLE_LOCALSTACK_PYTHON", ROOT / ".venv-localstack" / "bin" / "python"))
S3RVER = Path(os.environ.get("CASTABLE_S3RVER", ROOT / ".tools" / "node_modules" / ".bin" / "s3rver"))


def _installed(path: Path, what: str) -> Path:
    """Fail (never skip) when a server the suite needs is missing: ``make test`` installs it."""
    if not path.exists():
        pytest.fail(f"{what} is not installed at {path}; `make test` installs it")
    return path


@pytest.fixture(scope="session")
def localstack_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """LocalStack's own S3 on loopback for the session (tests using it share one xdist group)."""
    python = _installed(LOCALSTACK_PYTHON, "LocalStack (localstack-core)")
    with localstack_s3(python, tmp_path_factory.mktemp("localstack")) as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def s3rver_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """s3rver, which ignores conditional writes, on loopback for the session."""
    binary = _installed(S3RVER, "s3rver (npm)")
    with s3rver(binary, tmp_path_factory.mktemp("s3rver")) as endpoint:
        yield endpoint


def new_bucket(endpoint: str, **credentials: Any) -> str:
    """A fresh bucket on the S3 server at ``endpoint``."""
    name = f"castable-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **credentials).create_bucket(Bucket=name)
    return name


@pytest.fixture
def s3_bucket(s3_endpoint: str) -> str:
    return new_bucket(s3_endpoint)


@pytest.fixture
def s3_options(s3_endpoint: str) -> dict[str, str]:
    return {"endpoint_url": s3_endpoint, "region": "us-east-1"}


@pytest.fixture(params=["local", "s3"])
def table_uri(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, str] | None]:
    """A fresh table location on each backend, with the storage options it needs."""
    if request.param == "local":
        return str(tmp_path / "table"), None
    bucket = request.getfixturevalue("s3_bucket")
    return f"s3://{bucket}/tables/t1", request.getfixturevalue("s3_options")


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if request.param == "local":
        return LocalStore(tmp_path / "store")
    bucket = request.getfixturevalue("s3_bucket")
    return S3Store(bucket, "root/prefix", make_s3_client(request.getfixturevalue("s3_options")))


EVENTS = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("category", pa.string()),
        pa.field("value", pa.float64()),
    ]
)


def events(start: int, stop: int) -> pa.Table:
    """Deterministic rows with ids in [start, stop)."""
    ids = list(range(start, stop))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "category": [("a", "b", "c", None)[i % 4] for i in ids],
            "value": [i * 0.5 for i in ids],
        },
        schema=EVENTS,
    )


def keyed_events(table_uri: tuple[str, dict[str, str] | None], rows: int) -> Any:
    """A new EVENTS table keyed by ``id`` at ``table_uri``, holding ``events(0, rows)``."""
    import castable

    uri, options = table_uri
    t = castable.create_table(uri, EVENTS, primary_key="id", storage_options=options)
    t.append(events(0, rows))
    return t


def other(t: Any) -> Any:
    """A second handle on ``t``'s table (another writer), opened now."""
    return load_table(t.store)


def live(t: Any, where: str | None = None) -> dict[int, tuple[str | None, float | None]]:
    """The newest version's rows of an EVENTS table by key (asserting one live row per key)."""
    got = t.refresh().scan(filter=where).to_arrow().to_pylist()
    keys = [r["id"] for r in got]
    assert len(keys) == len(set(keys)), "one live row per key"
    return {r["id"]: (r["category"], r["value"]) for r in got}


def snapshot_of(store: ObjectStore) -> dict[str, bytes]:
    """Every object under a store and its bytes: to show an operation changed nothing."""
    return {info.key: store.get(info.key).data for info in store.list("")}
