"""The integration tier's fixtures: S3 servers on 127.0.0.1 (moto with S3's atomic conditional
writes, LocalStack's own S3, s3rver), the Lambda bundle, the commit function on moto, and the
table and store fixtures over both backends (the local store and moto S3 over HTTP)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from helpers import ROOT, SHORT_JVM
from helpers.aws_stubs import function_code, run_handler_in_process
from helpers.backends import backend_fixtures
from helpers.bundles import build_bundle
from helpers.s3servers import localstack_s3, moto_s3, new_bucket, s3rver

table_uri, store = backend_fixtures("local", "s3")
os.environ.update(SHORT_JVM)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server on loopback for the whole session (conditional writes made atomic, as
    on S3); yields its endpoint URL."""
    with moto_s3() as endpoint:
        yield endpoint


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


@pytest.fixture(scope="session")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Lambda bundle, built once per session (tests using it share the "bundle" xdist group)."""
    return build_bundle(tmp_path_factory.mktemp("bundle"))


@pytest.fixture
def s3_bucket(s3_endpoint: str) -> str:
    return new_bucket(s3_endpoint)


@pytest.fixture
def s3_options(s3_endpoint: str) -> dict[str, str]:
    return {"endpoint_url": s3_endpoint, "region": "us-east-1"}


@pytest.fixture
def commit_function(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The commit Lambda on the moto server (over HTTP); its handler runs in this process."""
    from moto.awslambda.models import LambdaFunction

    monkeypatch.setattr(LambdaFunction, "_invoke_lambda", run_handler_in_process)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL_LAMBDA", s3_endpoint)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    iam = boto3.client("iam", endpoint_url=s3_endpoint, region_name="us-east-1")
    name = f"castable-commit-{uuid.uuid4().hex[:8]}"
    role = iam.create_role(RoleName=name, AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    boto3.client("lambda", endpoint_url=s3_endpoint, region_name="us-east-1").create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=role,
        Handler="lambdas.commit.handler",
        Code={"ZipFile": function_code()},
    )
    return name
