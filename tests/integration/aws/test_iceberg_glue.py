"""castable tables registered in the AWS Glue Data Catalog (castable.iceberg.register_glue), against
moto's Glue and S3 on 127.0.0.1: pyiceberg's own Glue catalog finds the table and reads castable's
rows; the registration moves only forward; a Glue table of that name that is another table's is
left alone; a registration that loses a race to another reads again; no update fills Glue's
table-version archive."""

from __future__ import annotations

from typing import Any

import boto3
import pyarrow as pa
import pytest
from helpers.s3servers import new_bucket
from pyiceberg.catalog import load_catalog

import castable
from castable.iceberg import IcebergPublishError, publish, register_glue

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("price", pa.decimal128(9, 2))])


def _rows(lo: int, hi: int) -> pa.Table:
    ids = list(range(lo, hi))
    return pa.table({"id": ids, "name": [f"n{i}" for i in ids], "price": [None] * len(ids)}, schema=SCHEMA)


@pytest.fixture
def glue(s3_endpoint: str) -> Any:
    client = boto3.client("glue", endpoint_url=s3_endpoint, region_name="us-east-1")
    database = f"db_{new_bucket(s3_endpoint).replace('-', '_')}"
    client.create_database(DatabaseInput={"Name": database})
    client.database = database
    return client


@pytest.fixture
def table(s3_endpoint: str) -> castable.Table:
    options = {"endpoint_url": s3_endpoint, "region": "us-east-1"}
    uri = f"s3://{new_bucket(s3_endpoint)}/tables/orders"
    created = castable.create_table(uri, SCHEMA, primary_key="id", storage_options=options)
    created.append(_rows(0, 10))
    return created


def _catalog(endpoint: str) -> Any:
    return load_catalog(
        "glue",
        **{
            "type": "glue",
            "glue.endpoint": endpoint,
            "s3.endpoint": endpoint,
            "client.region": "us-east-1",
            "client.access-key-id": "testing",
            "client.secret-access-key": "testing",
        },
    )


def test_pyiceberg_finds_the_table_in_glue_and_reads_castables_rows_after_each_commit(
    table: castable.Table, glue: Any, s3_endpoint: str
) -> None:
    first = register_glue(table, glue.database, "orders", glue=glue)
    assert first.changed and first.metadata_location.endswith("/metadata/v1.metadata.json")
    held = glue.get_table(DatabaseName=glue.database, Name="orders")["Table"]
    assert held["TableType"] == "EXTERNAL_TABLE"
    assert held["Parameters"] == {"table_type": "ICEBERG", "metadata_location": first.metadata_location}
    assert held["StorageDescriptor"]["Location"] == table.uri
    columns = [
        (c["Name"], c["Type"], c["Parameters"]["iceberg.field.id"]) for c in held["StorageDescriptor"]["Columns"]
    ]
    assert columns == [("id", "bigint", "1"), ("name", "string", "2"), ("price", "decimal(9,2)", "3")]

    table.append(_rows(10, 15))
    table.delete("id < 3")
    second = register_glue(table, glue.database, "orders", glue=glue)
    assert second.changed and second.metadata_location.endswith("/v3.metadata.json")
    parameters = glue.get_table(DatabaseName=glue.database, Name="orders")["Table"]["Parameters"]
    assert parameters["previous_metadata_location"] == first.metadata_location
    read = _catalog(s3_endpoint).load_table(f"{glue.database}.orders").scan().to_arrow()
    assert sorted(read.column("id").to_pylist()) == list(range(3, 15))


def test_a_registration_never_moves_the_glue_table_back(table: castable.Table, glue: Any) -> None:
    older = publish(table)
    table.append(_rows(10, 12))
    newer = register_glue(table, glue.database, "orders", glue=glue)
    again = register_glue(table, glue.database, "orders", location=older, glue=glue)
    assert not again.changed and again.metadata_location == newer.metadata_location
    held = glue.get_table(DatabaseName=glue.database, Name="orders")["Table"]["Parameters"]["metadata_location"]
    assert held == newer.metadata_location


def test_a_glue_table_of_that_name_that_is_another_tables_is_left_alone(table: castable.Table, glue: Any) -> None:
    other = {"Location": "s3://elsewhere/warehouse/orders", "Columns": []}
    parameters = {
        "table_type": "ICEBERG",
        "metadata_location": "s3://elsewhere/warehouse/orders/metadata/v9.metadata.json",
    }
    glue.create_table(
        DatabaseName=glue.database, TableInput={"Name": "orders", "StorageDescriptor": other, "Parameters": parameters}
    )
    with pytest.raises(IcebergPublishError, match="another table's"):
        register_glue(table, glue.database, "orders", glue=glue)
    assert glue.get_table(DatabaseName=glue.database, Name="orders")["Table"]["Parameters"] == parameters


def test_a_location_that_is_no_publication_is_refused(table: castable.Table, glue: Any) -> None:
    with pytest.raises(IcebergPublishError, match="no castable publication"):
        register_glue(table, glue.database, "orders", location=f"{table.uri}/manifest/v1.json", glue=glue)
    with pytest.raises(glue.exceptions.EntityNotFoundException):
        glue.get_table(DatabaseName=glue.database, Name="orders")


class _Racing:
    """A Glue client whose next ``update_table`` loses a race: another registration moved the
    table first (Glue refuses an update naming a table version that is no longer current)."""

    def __init__(self, client: Any, table: castable.Table) -> None:
        self.client, self.table, self.raced = client, table, False
        self.exceptions = client.exceptions

    def get_table(self, **kwargs: Any) -> Any:
        return self.client.get_table(**kwargs)

    def update_table(self, **kwargs: Any) -> Any:
        if not self.raced:
            self.raced = True
            self.table.append(_rows(100, 101))
            register_glue(self.table, kwargs["DatabaseName"], kwargs["TableInput"]["Name"], glue=self.client)
            error = {"Error": {"Code": "ConcurrentModificationException", "Message": "stale VersionId"}}
            raise self.client.exceptions.ConcurrentModificationException(error, "UpdateTable")
        return self.client.update_table(**kwargs)


def test_a_registration_that_loses_a_race_reads_again_and_leaves_the_newest(
    table: castable.Table, glue: Any, s3_endpoint: str
) -> None:
    register_glue(table, glue.database, "orders", glue=glue)
    table.append(_rows(10, 12))
    mine = publish(table)
    options = {"endpoint_url": s3_endpoint, "region": "us-east-1"}
    racing = _Racing(glue, castable.open_table(table.uri, storage_options=options))
    outcome = register_glue(table, glue.database, "orders", location=mine, glue=racing)
    assert racing.raced and not outcome.changed, "the winner's newer version stands"
    held = glue.get_table(DatabaseName=glue.database, Name="orders")["Table"]["Parameters"]["metadata_location"]
    assert held.endswith("/v3.metadata.json") and outcome.metadata_location == held


def test_updates_name_the_version_they_read_and_skip_the_table_version_archive(
    table: castable.Table, glue: Any
) -> None:
    """Glue keeps every table version unless told not to, up to a quota per table and per account
    (AWS Glue quotas: table versions); a table registered on every commit would exhaust it.
    moto ignores both parameters, so the request itself is checked."""
    sent: list[dict[str, Any]] = []
    glue.meta.events.register("provide-client-params.glue.UpdateTable", lambda params, **_: sent.append(params))
    register_glue(table, glue.database, "orders", glue=glue)
    for lo in (10, 20):
        table.append(_rows(lo, lo + 2))
        register_glue(table, glue.database, "orders", glue=glue)
    assert [(p["VersionId"], p["SkipArchive"]) for p in sent] == [("1", True), ("2", True)]


def test_the_cli_publishes_and_registers_in_glue_and_refuses_a_bad_name(
    table: castable.Table, glue: Any, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from castable.cli import app

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    options = ["-o", f"endpoint_url={s3_endpoint}", "-o", "region=us-east-1"]
    runner = CliRunner()
    out = runner.invoke(app, ["iceberg", "publish", table.uri, "--glue", f"{glue.database}.orders", *options])
    assert out.exit_code == 0, out.output
    location = f"{table.uri}/metadata/v1.metadata.json"
    assert f"Glue table {glue.database}.orders: {location}" in out.output
    assert (
        glue.get_table(DatabaseName=glue.database, Name="orders")["Table"]["Parameters"]["metadata_location"]
        == location
    )
    out = runner.invoke(app, ["iceberg", "publish", table.uri, "--glue", "orders", *options])
    assert isinstance(out.exception, castable.InvalidInputError)
    assert "--glue takes DATABASE.TABLE, not 'orders'" in str(out.exception)
