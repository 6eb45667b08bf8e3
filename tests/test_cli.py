"""The castable CLI end to end on a local table, and on S3 over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from conftest import events
from typer.testing import CliRunner

import castable
from castable.cli import app, main

runner = CliRunner()


def run(*args: str, ok: bool = True) -> str:
    result = runner.invoke(app, list(args), catch_exceptions=False) if ok else runner.invoke(app, list(args))
    if ok:
        assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    pq.write_table(events(0, 500), tmp_path / "a.parquet")
    pacsv.write_csv(
        events(500, 600).drop_columns(["category"]).append_column("category", events(500, 600)["category"]),
        tmp_path / "b.csv",
    )
    return tmp_path / "a.parquet", tmp_path / "b.csv"


def test_cli_tour(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    uri = str(tmp_path / "t")
    run("create", uri, "--like", str(inputs[0]), "-k", "id", "-p", "write.row-group-size-bytes=4096")
    assert "version 1" in run("append", uri, str(inputs[0]), "--commit-id", "load-a")
    assert "version 1" in run("append", uri, str(inputs[0]), "--commit-id", "load-a")
    out = run("delete", uri, "id BETWEEN 0 AND 99")
    assert "version 2" in out
    assert "no row matched" in run("delete", uri, "category = 'zzz'")
    assert run("scan", uri, "--count").strip() == "400"
    assert run("scan", uri, "--count", "--version", "1").strip() == "500"
    assert "id" in run("scan", uri, "--columns", "id,value", "--filter", "id < 105", "--limit", "3")
    run("scan", uri, "--output", str(tmp_path / "out.parquet"))
    assert pq.read_table(tmp_path / "out.parquet").num_rows == 400
    run("scan", uri, "--filter", "category = 'a'", "--output", str(tmp_path / "out.csv"))
    assert pacsv.read_csv(tmp_path / "out.csv").num_rows == 100
    history = run("history", uri)
    assert "append" in history and "delete" in history and "create" in history
    info = run("info", uri)
    assert "primary key: id" in info and "version 2" in info


def test_cli_erase(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    uri = str(tmp_path / "t")
    run("create", uri, "--like", str(inputs[0]), "-k", "id")
    run("append", uri, str(inputs[0]))
    out = run("erase", uri, "id = 7", "--purge")
    assert '"rows_erased": 1' in out and '"verified": true' in out
    assert run("scan", uri, "--count").strip() == "499"


def test_cli_maintenance(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    uri = str(tmp_path / "t")
    run("create", uri, "--like", str(inputs[0]), "-k", "id")
    for i in range(3):
        run("append", uri, str(inputs[0]))
        run("delete", uri, f"id = {i}")
    assert "files_rewritten" in run("compact", uri, "--sort-by", "id")
    assert "versions_expired" in run("expire", uri, "--retain-versions", "1")
    assert "data/" in run("gc", uri, "--grace-hours", "0", "--dry-run")
    assert "objects_removed" in run("gc", uri, "--grace-hours", "0")
    assert run("scan", uri, "--count").strip() == str(1500 - 1 - 2 - 3)  # each delete hit every copy so far
    assert castable.open_table(uri).manifest.tombstones == ()


def test_cli_add_files(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    uri = str(tmp_path / "t")
    run("create", uri, "--like", str(inputs[0]))
    (tmp_path / "t" / "data" / "spark").mkdir(parents=True)
    (tmp_path / "t" / "data" / "spark" / "part-0.parquet").write_bytes(inputs[0].read_bytes())
    assert "version 1" in run("add-files", uri, "data/spark/part-0.parquet", "--commit-id", "emr-1")
    assert run("scan", uri, "--count").strip() == "500"


def test_cli_csv_append_and_schema_option(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    uri = str(tmp_path / "t")
    run("create", uri, "--schema", "id:int64,value:double,category:string")
    run("append", uri, str(inputs[1]))
    assert castable.open_table(uri).scan().count() == 100


def test_cli_csv_is_read_as_the_table_types_and_round_trips(tmp_path: Path) -> None:
    """A double written `1`, a string written `123`, semicolons, a custom NULL marker, and
    castable's own CSV output (timestamps with a zone) appended back: all as the table's types."""
    uri = str(tmp_path / "t")
    run("create", uri, "--schema", "id:int64,value:double,category:string")
    (tmp_path / "a.csv").write_text("id;value;category\n1;1;123\n2;-;x\n")
    run("append", uri, str(tmp_path / "a.csv"), "--delimiter", ";", "--null-value", "-")
    got = castable.open_table(uri).scan().to_arrow().sort_by("id").to_pylist()
    assert got == [{"id": 1, "value": 1.0, "category": "123"}, {"id": 2, "value": None, "category": "x"}]
    (tmp_path / "bad.csv").write_text("id,value,category\n3,1,a\n4,one,b\n")
    failed = runner.invoke(app, ["append", uri, str(tmp_path / "bad.csv")])
    assert isinstance(failed.exception, castable.SchemaMismatchError)
    assert "bad.csv, row 2, column 'value': 'one' is not double" in str(failed.exception)
    assert castable.open_table(uri).version == 1

    stamped = str(tmp_path / "ts")
    table = castable.create_table(stamped, pa.schema([("id", pa.int64()), ("at", pa.timestamp("us", tz="UTC"))]))
    table.append(pa.table({"id": [1], "at": [datetime(2026, 11, 21, 8, 30, tzinfo=UTC)]}, schema=table.schema))
    run("scan", stamped, "--output", str(tmp_path / "out.csv"))
    run("append", stamped, str(tmp_path / "out.csv"))
    assert (
        castable.open_table(stamped).scan().to_arrow().column("at").to_pylist()
        == [datetime(2026, 11, 21, 8, 30, tzinfo=UTC)] * 2
    )


def test_cli_on_s3(s3_bucket: str, s3_endpoint: str, inputs: tuple[Path, Path]) -> None:
    uri = f"s3://{s3_bucket}/cli"
    opt = ["-o", f"endpoint_url={s3_endpoint}"]
    run("create", uri, "--like", str(inputs[0]), *opt)
    run("append", uri, str(inputs[0]), *opt)
    assert run("scan", uri, "--count", *opt).strip() == "500"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["scan", "{uri}"], "no castable table"),
        (["create", "{uri}"], "exactly one of"),
        (["create", "{uri}", "--schema", "id:wat"], "unknown type"),
        (["create", "{uri}", "--schema", "id"], "NAME:TYPE"),
        (["append", "{uri}", "/nonexistent.parquet"], "does not exist"),
    ],
)
def test_cli_errors_are_one_line(tmp_path: Path, args: list[str], message: str, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "t")
    if args[0] == "append":
        castable.create_table(uri, events(0, 1).schema)
    monkeypatch.setattr("sys.argv", ["castable", *[a.format(uri=uri) for a in args]])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 1
    assert message in capsys.readouterr().err


def test_cli_rejects_corrupt_parquet(tmp_path: Path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "t")
    castable.create_table(uri, events(0, 1).schema)
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 garbage garbage PAR1")
    monkeypatch.setattr("sys.argv", ["castable", "append", uri, str(bad)])
    with pytest.raises(SystemExit):
        main()
    assert "cannot read" in capsys.readouterr().err
    assert castable.open_table(uri).version == 0


def test_cli_prints_values_as_they_are(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """Bracketed types are not swallowed as rich markup, JSON is not hard-wrapped in a narrow
    terminal, errors keep their brackets, and --version answers."""
    uri = str(tmp_path / "t")
    table = castable.create_table(uri, pa.schema([("id", pa.int64()), ("at", pa.timestamp("us", tz="UTC"))]))
    table.append(pa.table({"id": list(range(3)), "at": [None] * 3}, schema=table.schema))
    assert "timestamp[us, tz=UTC]" in run("info", uri)
    monkeypatch.setenv("COLUMNS", "40")
    out = run("delete", uri, "id IN (0, 1, 2)", "--commit-id", "a-rather-long-commit-id-for-a-narrow-terminal")
    line = next(x for x in out.splitlines() if x.startswith("committed version"))
    assert json.loads(line.split(": ", 1)[1])["rows_deleted"] == 3, "the summary is one JSON line"
    assert run("--version").strip() == f"castable {castable.__version__}"
    monkeypatch.setattr("sys.argv", ["castable", "scan", uri, "--filter", "at = 'x[1]'"])
    with pytest.raises(SystemExit):
        main()
    assert "x[1]" in capsys.readouterr().err


def test_a_failed_scan_output_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows go to a hidden temporary name, renamed at the end: a scan that fails midway leaves
    neither a partial file that looks complete nor the temporary."""
    uri = str(tmp_path / "t")
    castable.create_table(uri, events(0, 1).schema).append(events(0, 100))
    previous = tmp_path / "out.parquet"
    previous.write_bytes(b"an older export")

    def broken(self: castable.Scan) -> Iterator[pa.RecordBatch]:
        yield from events(0, 10).to_batches()
        raise castable.CorruptObjectError("data/x.parquet: a page does not decode")

    monkeypatch.setattr(castable.Scan, "to_batches", broken)
    failed = runner.invoke(app, ["scan", uri, "--output", str(previous)])
    assert isinstance(failed.exception, castable.CorruptObjectError)
    assert previous.read_bytes() == b"an older export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.parquet", "t"]
    monkeypatch.undo()
    run("scan", uri, "--output", str(previous))
    assert pq.read_table(previous).num_rows == 100
