"""The served catalog against Apache Iceberg's own REST spec (tests/spec/rest-catalog-open-api.yaml,
from apache-iceberg-1.10.2), by schemathesis: requests generated from the spec's models, valid
and not, with a fixed seed and a bounded time, on a local warehouse and on S3 (moto). No answer
may be a server error, have a status the spec does not list for its operation, or a body
outside the spec's schema for that status.

What is tested is what the catalog serves: the operations its ``/v1/config`` advertises (as the
spec has clients decide) and the token endpoint, on the paths without the optional
``{prefix}`` (castable's config names none). The spec names the bare ``ErrorModel`` as the body
of some errors where its own examples, and every client, use the wrapped
``{"error": ErrorModel}``; castable answers the wrapped form, and the test checks against it.
Half the requests name the warehouse's existing namespace and table, so commits, loads,
property changes and drops act on a real castable table; the others name whatever the spec
allows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from helpers import ROOT
from helpers.rest_catalog import Served
from helpers.s3servers import new_bucket

from castable.catalog.service import ENDPOINTS

SPEC = ROOT / "tests" / "spec" / "rest-catalog-open-api.yaml"
SEED = 20261203
SECONDS = 30
"""The time each run of schemathesis has: bounded, so the gate's time is known."""
CHECKS = "not_a_server_error,status_code_conformance,response_schema_conformance,content_type_conformance"
ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "s": ["a", "b", "c"]})


def served_spec(uri: str) -> dict[str, Any]:
    """The spec's operations the catalog serves, at ``uri``, without the ``{prefix}``."""
    doc = yaml.safe_load(SPEC.read_text())
    served = {tuple(e.replace("/{prefix}", "").split(" ")) for e in ENDPOINTS}
    served |= {("GET", "/v1/config"), ("POST", "/v1/oauth/tokens")}
    paths: dict[str, Any] = {}
    for path, item in doc["paths"].items():
        path = path.replace("/v1/{prefix}/", "/v1/")
        kept = {m: op for m, op in item.items() if (m.upper(), path) in served}
        if not kept:
            continue
        params = [p for p in item.get("parameters", []) if not p.get("$ref", "").endswith("/prefix")]
        paths[path] = {**kept, **({"parameters": params} if params else {})}
    for item in paths.values():
        for op in item.values():
            if isinstance(op, dict):
                for answer in op.get("responses", {}).values():
                    for media in answer.get("content", {}).values():
                        if media.get("schema") == {"$ref": "#/components/schemas/ErrorModel"}:
                            media["schema"] = {"$ref": "#/components/schemas/IcebergErrorResponseBody"}
    doc["components"]["schemas"]["IcebergErrorResponseBody"] = {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {"$ref": "#/components/schemas/ErrorModel"}},
    }
    doc["paths"] = paths
    doc["servers"] = [{"url": uri}]
    return doc


def run_schemathesis(served: Served, folder: Path, *, existing: bool) -> None:
    folder.mkdir()
    spec = folder / "spec.yaml"
    spec.write_text(yaml.safe_dump(served_spec(served.uri), sort_keys=False))
    config = folder / "schemathesis.toml"
    config.write_text('[parameters]\n"path.namespace" = "db"\n"path.table" = "t"\n' if existing else "")
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(config),
        "run",
        str(spec),
        "--url",
        served.uri,
        "--seed",
        str(SEED),
        "--checks",
        CHECKS,
        "--phases",
        "examples,coverage,fuzzing",
        "--max-time",
        str(SECONDS),
        "--generation-database",
        "none",
        "--no-color",
        "--workers",
        "1",
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=folder, timeout=SECONDS * 4, env=os.environ)
    found = re.search(r"(\d+) generated", done.stdout)
    assert found and int(found.group(1)) > 100, done.stdout[-3000:]
    assert done.returncode == 0, done.stdout[-12000:]


def seeded(served: Served) -> None:
    client = served.client()
    client.create_namespace("db")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("s", pa.string())])
    client.create_table("db.t", schema=schema).append(ROWS.cast(schema))


@pytest.mark.parametrize("existing", [True, False], ids=["its-table", "any-name"])
def test_the_local_catalog_answers_as_the_spec_says(served: Served, tmp_path: Path, existing: bool) -> None:
    seeded(served)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_bytes(b"unchanged")
    run_schemathesis(served, tmp_path / "run", existing=existing)
    assert (outside / "keep").read_bytes() == b"unchanged"


def test_the_catalog_on_s3_answers_as_the_spec_says(s3_endpoint: str, tmp_path: Path) -> None:
    options = {"endpoint_url": s3_endpoint, "region": "us-east-1"}
    served = Served(f"s3://{new_bucket(s3_endpoint)}/warehouse", options)
    try:
        seeded(served)
        run_schemathesis(served, tmp_path / "run", existing=True)
    finally:
        served.close()
