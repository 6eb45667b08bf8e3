"""The castable CLI end to end, as scripts use it, on a local table and on S3 over HTTP: each
command through the entry point the installed command calls, with its output piped
(helpers/cli.py), and the installed ``castable`` command itself in a subprocess where the
process is the subject (a whole tour, stdout as a binary pipe, Ctrl-C)."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from helpers.cli import in_process
from helpers.tables import events
from typer.testing import CliRunner

import castable
from castable.cli import app
from castable.format.layout import manifest_key

runner = CliRunner()
CASTABLE = str(Path(sys.executable).with_name("castable"))


def checked(done: subprocess.CompletedProcess[str], code: int) -> subprocess.CompletedProcess[str]:
    assert done.returncode == code, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def installed(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    """Run the installed command in a subprocess with piped output in a narrow terminal's width."""
    env = {**os.environ, "COLUMNS": "40"}
    return checked(subprocess.run([CASTABLE, *args], capture_output=True, text=True, env=env), code)


def cli(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    """Run a command in this process, as the installed command runs it, with piped output."""
    return checked(in_process(args), code)


def run(*args: str) -> str:
    return cli(*args).stdout


def shell(*args: str) -> str:
    """What the installed command prints to its stdout pipe."""
    return installed(*args).stdout


def fails(*args: str) -> str:
    """The one-line error of a command that must fail with status 1 (no traceback, no escapes)."""
    err = cli(*args, code=1).stderr
    assert err.startswith("error: ") and err.count("\n") == 1 and "\x1b" not in err, err
    return err


def run_json(*args: str) -> Any:
    return json.loads(run(*args, "--json"))


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
    shell("create", uri, "--like", str(inputs[0]), "-k", "id", "-p", "write.row-group-size-bytes=4096")
    assert "version 1" in shell("append", uri, str(inputs[0]), "--commit-id", "load-a")
    assert "version 1" in shell("append", uri, str(inputs[0]), "--commit-id", "load-a")
    out = shell("delete", uri, "id BETWEEN 0 AND 99")
    assert "version 2" in out
    assert "no row matched" in shell("delete", uri, "category = 'zzz'")
    assert shell("scan", uri, "--count").strip() == "400"
    assert shell("scan", uri, "--count", "--version", "1").strip() == "500"
    assert "id" in shell("scan", uri, "--columns", "id,value", "--filter", "id < 105", "--limit", "3")
    shell("scan", uri, "--output", str(tmp_path / "out.parquet"))
    assert pq.read_table(tmp_path / "out.parquet").num_rows == 400
    shell("scan", uri, "--filter", "category = 'a'", "--output", str(tmp_path / "out.csv"))
    assert pacsv.read_csv(tmp_path / "out.csv").num_rows == 100
    history = shell("history", uri)
    assert "append" in history and "delete" in history and "create" in history
    info = shell("info", uri)
    assert "primary key: id" in info and "version 2" in info


def test_cli_erase(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    uri = str(tmp_path / "t")
    run("create", uri, "--like", str(inputs[0]), "-k", "id")
    run("append", uri, str(inputs[0]))
    out = " ".join(run("erase", uri, "id = 7", "--purge", "--yes").split())
    assert out.startswith("erased 1 row from 1 data file, committed as version 2; expired versions 0-1, "), out
    assert "time travel now starts at 2; deleted 1 data file and " in out and out.endswith("; verified: no trace")
    assert run("scan", uri, "--count").strip() == "499"
    report = run_json("erase", uri, "id = 8", "--purge", "--yes")
    assert report["rows_erased"] == 1 and report["purge"]["verified"] and report["purge"]["objects_deleted"]


def test_cli_says_when_it_cut_the_rows_it_shows(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    castable.create_table(uri, events(0, 1).schema, primary_key="id").append(events(0, 25))
    cut = " ".join(run("scan", uri).split())
    assert "the first 20 rows; --limit N shows more, --output FILE writes them all" in cut
    assert "the first" not in run("scan", uri, "--limit", "25")
    assert run_json("scan", uri)["truncated"] and not run_json("scan", uri, "--limit", "25")["truncated"]
    assert len(run_json("scan", uri, "--limit", "3")["rows"]) == 3
    assert run_json("changes", uri, "--from", "0", "--limit", "5")["truncated"]
    assert "the first 5 rows" in " ".join(run("changes", uri, "--from", "0", "--limit", "5").split())


def test_cli_erase_asks_before_its_purge_expires_history(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    uri = str(tmp_path / "t")
    run("create", uri, "--like", str(inputs[0]), "-k", "id")
    run("append", uri, str(inputs[0]))
    run("delete", uri, "id = 1")
    declined = runner.invoke(app, ["erase", uri, "id = 7", "--purge"], input="n\n")
    assert declined.exit_code == 1 and "--purge expires versions 0-2 of " in declined.output
    assert "time travel and the change feed will start at the erase's own version" in declined.output
    table = castable.open_table(uri)
    assert table.version == 2 and table.scan(filter="id = 7").count() == 1, "declined: nothing erased"
    accepted = runner.invoke(app, ["erase", uri, "id = 7", "--purge"], input="y\n")
    assert accepted.exit_code == 0 and "time travel now starts at 3" in " ".join(accepted.output.split())
    assert [h.version for h in table.history()] == [3]
    quiet = runner.invoke(app, ["erase", uri, "id = 7", "--purge"], input="")
    assert quiet.exit_code == 0 and "nothing erased: no row matched" in " ".join(quiet.output.split())


def test_cli_maintenance(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    uri = str(tmp_path / "t")
    run("create", uri, "--like", str(inputs[0]), "-k", "id", "-p", "write.inline.max-bytes=0")  # data files, for gc
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
    assert "bad.csv, row 2, column 'value': 'one' is not double" in fails("append", uri, str(tmp_path / "bad.csv"))
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


def test_a_table_created_like_a_csv_takes_parquet_files_and_its_own_export(tmp_path: Path) -> None:
    """pyarrow infers seconds for ``2013-01-01 05:00:00``, which no Parquet file holds: the table
    takes microseconds, so its own export and another tool's file (int32 where the table has
    int64) append; text in a number column is refused with how to convert, the table unchanged."""
    uri = str(tmp_path / "t")
    (tmp_path / "flights.csv").write_text("flight,time_hour\n1545,2013-01-01 05:00:00\n1714,2013-01-01 06:00:00\n")
    run("create", uri, "--like", str(tmp_path / "flights.csv"))
    assert str(castable.open_table(uri).schema.field("time_hour").type) == "timestamp[us]"
    run("append", uri, str(tmp_path / "flights.csv"))
    run("scan", uri, "--output", str(tmp_path / "export.parquet"))
    run("append", uri, str(tmp_path / "export.parquet"))
    other = pa.table(
        {"flight": pa.array([7], pa.int32()), "time_hour": pa.array([datetime(2013, 1, 2)], pa.timestamp("ns"))}
    )
    pq.write_table(other, tmp_path / "other.parquet")
    run("append", uri, str(tmp_path / "other.parquet"))
    assert castable.open_table(uri).scan().count() == 5
    pq.write_table(pa.table({"flight": ["8"], "time_hour": other["time_hour"]}), tmp_path / "text.parquet")
    assert "column 'flight' is string, expected int64: castable does not parse text" in fails(
        "append", uri, str(tmp_path / "text.parquet")
    )
    assert castable.open_table(uri).version == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["scan", "{nowhere}"], "no castable table"),
        (["create", "{uri}"], "exactly one of"),
        (["create", "{uri}", "--schema", "id:wat"], "unknown type"),
        (["create", "{uri}", "--schema", "id"], "NAME:TYPE"),
        (["create", "{uri}", "--schema", "at:timestamp[us, tz=UTC"], "timestamp[us, tz=UTC"),
        (["append", "{uri}", "/nonexistent.parquet"], "does not exist"),
        (["append", "{uri}", "/nonexistent.xlsx", "--format", "xlsx"], "format must be one of parquet, csv, jsonl"),
        (["add-files", "{uri}", "data/nope.parquet"], "looked for file://"),
        (["scan", "{uri}", "--filter", "category = a"], "unknown column 'a' in predicate"),
        (["scan", "{uri}", "--filter", "id = = 3"], "at column 6 near '='"),
        (["scan", "{uri}", "--version", "7"], "does not exist (the newest is 0)"),
        (["scan", "{uri}", "--as-of", "yesterday"], "ISO 8601"),
        (["scan", "{uri}", "--output", "rows.xlsx"], "cannot tell the output format"),
        (["scan", "{uri}", "--output", "-", "--format", "parquet"], "not written to stdout"),
    ],
)
def test_cli_errors_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    uri = str(tmp_path / "t")
    if args[0] != "create":
        castable.create_table(uri, events(0, 1).schema)
    assert message in fails(*[a.format(uri=uri, nowhere=tmp_path / "nowhere") for a in args])


def test_cli_rejects_corrupt_parquet(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    castable.create_table(uri, events(0, 1).schema)
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 garbage garbage PAR1")
    assert "cannot read" in fails("append", uri, str(bad))
    assert castable.open_table(uri).version == 0


def test_cli_prints_values_as_they_are(tmp_path: Path) -> None:
    """Bracketed types are not swallowed as rich markup, JSON is not hard-wrapped in a narrow
    terminal, errors keep their brackets, and --version answers."""
    uri = str(tmp_path / "t")
    table = castable.create_table(uri, pa.schema([("id", pa.int64()), ("at", pa.timestamp("us", tz="UTC"))]))
    table.append(pa.table({"id": list(range(3)), "at": [None] * 3}, schema=table.schema))
    assert "timestamp[us, tz=UTC]" in run("info", uri)
    out = run("delete", uri, "id IN (0, 1, 2)", "--commit-id", "a-rather-long-commit-id-for-a-narrow-terminal")
    said = " ".join(out.split())  # words may wrap in a narrow terminal
    assert said.startswith("delete committed version 2: 3 rows deleted"), out
    assert run("--version").strip() == f"castable {castable.__version__}"
    assert "x[1]" in fails("scan", uri, "--filter", "at = 'x[1]'")


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


def test_cli_json_output_for_scripts(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    """Every command's --json prints one JSON document; a dry-run gc names what it would remove."""
    uri = str(tmp_path / "t")
    files_only = ["-p", "write.inline.max-bytes=0"]  # each append a data file: what gc counts below
    assert run_json("create", uri, "--like", str(inputs[0]), "-k", "id", *files_only)["version"] == 0
    appended = run_json("append", uri, str(inputs[0]), "--commit-id", "a")
    summary = castable.open_table(uri).manifest.commit.summary
    assert appended["summary"] == summary and appended["not_counted"] == []
    assert {k: appended[k] for k in ("version", "commit_id", "operation", "committed", "retried")} == {
        "version": 1,
        "commit_id": "a",
        "operation": "append",
        "committed": True,
        "retried": False,
    }
    assert (appended["rows_added"], appended["files_added"]) == (summary["rows_added"], 1)
    again = run_json("append", uri, str(inputs[0]), "--commit-id", "a")
    assert again["retried"] and again["version"] == 1
    assert run_json("delete", uri, "value < 5")["rows_deleted"] == 10
    assert run_json("delete", uri, "id < 0")["committed"] is False
    assert run_json("scan", uri, "--count") == {"version": 2, "count": 490}
    scanned = run_json("scan", uri, "--filter", "id = 11")
    one = [events(11, 12).to_pylist()[0]]
    assert scanned == {"version": 2, "columns": ["id", "category", "value"], "rows": one, "truncated": False}
    assert [h["operation"] for h in run_json("history", uri)] == ["delete", "append", "create"]
    info = run_json("info", uri)
    assert info["schema"][0] == {"name": "id", "type": "int64", "nullable": False, "id": 1} and info["damage"] is None
    assert run_json("compact", uri, "--min-file-size", "1000000")["files_rewritten"] == 1
    assert run_json("expire", uri, "--retain-versions", "1")["versions_expired"] == 3
    preview = run_json("gc", uri, "--grace-hours", "0", "--dry-run")
    # the compacted data file and the tombstone, and the two manifest segments that listed them
    assert preview["objects_to_remove"] == 4 and "objects_removed" not in preview
    assert run_json("gc", uri, "--grace-hours", "0")["objects_removed"] == 4
    assert run_json("repair", uri) == {"version": 3, "repaired": False}


def test_cli_says_what_a_delete_by_key_did_and_counts_it_when_asked(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    castable.create_table(uri, events(0, 1).schema, primary_key="id").append(events(0, 100))
    by_key = run_json("delete", uri, "id BETWEEN 10 AND 19")
    assert by_key["rows_deleted"] is None and by_key["not_counted"] == ["rows_deleted"]
    said = " ".join(run("delete", uri, "id BETWEEN 20 AND 29").split())
    assert said == (
        "delete committed version 3: rows deleted: not counted (written by key, no row read) (count=True counts them)"
    )
    assert run_json("delete", uri, "id BETWEEN 25 AND 39", "--count")["rows_deleted"] == 10
    assert " ".join(run("delete", uri, "id BETWEEN 0 AND 4", "--count").split()) == (
        "delete committed version 5: 5 rows deleted"
    )


def test_cli_scan_to_stdout_and_back(tmp_path: Path) -> None:
    """--output - streams CSV (default) or JSON Lines to stdout; castable's own JSON Lines output
    appends back as the same rows: zoned timestamps, decimals, dates, durations and bytes."""
    uri = str(tmp_path / "t")
    run(
        "create",
        uri,
        "--schema",
        "id:int64, at:timestamp[us, tz=UTC], amount:decimal128(10, 2), day:date32, took:duration[ms], raw:binary",
    )
    table = castable.open_table(uri)
    rows = pa.table(
        {
            "id": [1, 2],
            "at": [datetime(2026, 11, 21, 8, 30, tzinfo=UTC), None],
            "amount": [pa.scalar(12.5).cast(pa.decimal128(10, 2)).as_py(), None],
            "day": [datetime(2026, 11, 21).date(), None],
            "took": [timedelta(seconds=1.5), None],
            "raw": [b"\x00\xffbytes", None],
        },
        schema=table.schema,
    )
    table.append(rows)
    assert (
        "cannot be written as csv: Invalid UTF8" in installed("scan", uri, "--output", "-", code=1).stderr
    )  # raw bytes
    piped = installed("scan", uri, "--columns", "id,at,amount,day,took", "--output", "-")
    assert "wrote 2 rows" in piped.stderr and "wrote" not in piped.stdout
    assert next(csv.reader(io.StringIO(piped.stdout))) == ["id", "at", "amount", "day", "took"]
    lines = shell("scan", uri, "--output", "-", "--format", "jsonl").splitlines()
    assert json.loads(lines[0]) == {
        "id": 1,
        "at": "2026-11-21T08:30:00+00:00",
        "amount": "12.50",
        "day": "2026-11-21",
        "took": 1500,
        "raw": "AP9ieXRlcw==",
    }
    run("scan", uri, "--output", str(tmp_path / "rows.jsonl"))
    run("append", uri, str(tmp_path / "rows.jsonl"))
    again = castable.open_table(uri).scan().to_arrow()
    assert again.num_rows == 4 and again.group_by("id").aggregate([]).num_rows == 2
    assert again.filter(pa.compute.equal(again["id"], 1)).to_pylist() == [rows.to_pylist()[0]] * 2


def test_cli_reused_commit_id_says_so(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    uri = str(tmp_path / "t")
    run("create", uri, "--like", str(inputs[0]), "-k", "id")
    run("append", uri, str(inputs[0]), "--commit-id", "load-1")
    again = run("append", uri, str(inputs[1]), "--commit-id", "load-1")
    said = " ".join(again.split())
    assert said.startswith("commit id 'load-1' had already committed as version 1; nothing new was written: "), again
    run("delete", uri, "id < 5", "--commit-id", "d-1")
    assert "already committed as version 2" in run("delete", uri, "id < 50", "--commit-id", "d-1")
    assert castable.open_table(uri).scan().count() == 495


def test_cli_history_and_versions_after_expiry(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    """History lists every retained version, past a missing one; an expired version is called
    expired, not missing; a purge expires a prefix, never leaving older versions unlisted."""
    uri = str(tmp_path / "t")
    run("create", uri, "--like", str(inputs[0]), "-k", "id")
    run("append", uri, str(inputs[0]))
    run("delete", uri, "id = 1")
    (tmp_path / "t" / manifest_key(1)).unlink()  # as a failed expiry or a hand might leave it
    assert [h["version"] for h in run_json("history", uri)] == [2, 0]
    run("erase", uri, "id = 2", "--purge", "--yes")
    assert [h["version"] for h in run_json("history", uri)] == [3]
    assert "version 0 of file://" in fails("scan", uri, "--version", "0")
    assert "has expired" in fails("scan", uri, "--version", "0")
    assert not (tmp_path / "t" / manifest_key(0)).exists()


def test_cli_schema_types_with_commas(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    run(
        "create",
        uri,
        "--schema",
        "id:int64, at:timestamp[us, tz=UTC], amount:decimal128(10,2), tags:list<item: string>",
    )
    types = [c["type"] for c in run_json("info", uri)["schema"]]
    assert types == ["int64", "timestamp[us, tz=UTC]", "decimal128(10, 2)", "list<item: string>"]
    out = run("info", uri)
    assert "timestamp[us, tz=UTC]" in out and "decimal128(10, 2)" in out


def test_cli_takes_names_as_data_has_them_quoted_as_sql_quotes_them(tmp_path: Path) -> None:
    """Names with dots, spaces, separators and a leading `_` through --schema, a CSV's header,
    --filter, --columns, alter's --rename and --order: quoted in double quotes or backticks
    where they hold a separator, bare where they do not."""
    uri = str(tmp_path / "t")
    run("create", uri, "--schema", 'id:int64, "a.b":string, `my col`:double, "x:y, z":int64, _meta:string')
    assert [c["name"] for c in run_json("info", uri)["schema"]] == ["id", "a.b", "my col", "x:y, z", "_meta"]
    (tmp_path / "rows.csv").write_text('id,a.b,my col,"x:y, z",_meta\n1,p,1.5,7,m\n2,q,2.5,8,n\n')
    run("append", uri, str(tmp_path / "rows.csv"))
    got = run_json("scan", uri, "--columns", 'id,"x:y, z",`a.b`', "--filter", "\"my col\" > 2 AND `a.b` = 'q'")["rows"]
    assert got == [{"id": 2, "x:y, z": 8, "a.b": "q"}]
    run("alter", uri, "--rename", '"my col"=amount', "--rename", "_meta=meta data", "--order", '"x:y, z",id')
    table = castable.open_table(uri)
    assert table.schema.names == ["x:y, z", "id", "a.b", "amount", "meta data"]
    assert table.scan(filter="\"meta data\" = 'n'").to_arrow().column("amount").to_pylist() == [2.5]
    assert "a.b is not a column name; quote the column named 'a.b'" in fails("scan", uri, "--filter", "a.b = 'p'")
    assert "has no closing" in fails("scan", uri, "--columns", '"a.b')


def test_cli_alter_changes_fields_inside_a_struct_named_by_their_paths(tmp_path: Path) -> None:
    """``payload.user`` is a field inside column ``payload`` (as in SQL); ``"a.b"`` quoted is the
    column named so."""
    uri = str(tmp_path / "t")
    run("create", uri, "--schema", 'id:int64, payload:struct<user: struct<id: int64>, tags: list<string>>, "a.b":int32')
    run(
        "alter", uri, "--rename", "payload.user=person", "--add", "payload.user.name:string",  # adds come first
        "--drop", "payload.tags", "--widen", '"a.b":int64',
    )  # fmt: skip
    table = castable.open_table(uri)
    assert str(table.schema.field("payload").type) == "struct<person: struct<id: int64, name: string>>"
    assert table.schema.field("a.b").type == pa.int64()
    assert "unknown field 'payload.nope'" in fails("alter", uri, "--drop", "payload.nope")


def test_cli_refuses_tables_inside_tables(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    outer = str(tmp_path / "outer")
    run("create", outer, "--like", str(inputs[0]))
    assert "lies inside the table at" in fails("create", f"{outer}/data", "--like", str(inputs[0]))
    assert "a table exists inside it" in fails("create", str(tmp_path), "--like", str(inputs[0]))
    assert not (tmp_path / "outer" / "data").exists()


def test_cli_damaged_table_reads_and_repairs(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    """A truncated newest manifest: older versions and history still read, writes are refused
    with the way out, and `castable repair` commits the newest readable version forward."""
    uri = str(tmp_path / "t")
    run("create", uri, "--like", str(inputs[0]), "-k", "id")
    run("append", uri, str(inputs[0]))
    run("delete", uri, "id < 100")
    newest = tmp_path / "t" / manifest_key(2)
    newest.write_bytes(newest.read_bytes()[:100])
    assert "versions up to 1 can still be read" in fails("scan", uri)
    assert run("scan", uri, "--version", "1", "--count").strip() == "500"
    history = run_json("history", uri)
    assert [(h["version"], h["operation"]) for h in history] == [(2, "unreadable"), (1, "append"), (0, "create")]
    assert "castable repair" in fails("append", uri, str(inputs[0]))
    repaired = run_json("repair", uri)
    assert repaired["version"] == 3 and repaired["summary"] == {"restored_from": 1, "unreadable_versions": [2]}
    assert run("scan", uri, "--count").strip() == "500"
    run("append", uri, str(inputs[1]))
    assert run("scan", uri, "--count").strip() == "600"


def test_cli_interrupt_says_what_happened(tmp_path: Path) -> None:
    """Ctrl-C during a long append: exit 130 with one line saying what became of the commit."""
    uri = str(tmp_path / "t")
    castable.create_table(uri, events(0, 1).schema)
    ids = pa.array(range(8_000_000), pa.int64())
    big = pa.table({"id": ids, "category": pa.repeat("c", len(ids)), "value": ids.cast(pa.float64())})
    pacsv.write_csv(big, tmp_path / "big.csv")
    proc = subprocess.Popen(
        [CASTABLE, "append", uri, str(tmp_path / "big.csv")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    data = tmp_path / "t" / "data"
    while proc.poll() is None and not (data.exists() and any(p.is_file() for p in data.rglob("*"))):
        time.sleep(0.05)  # until the first data file is being written: the append is surely under way
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate()
    assert proc.returncode == 130, f"exit {proc.returncode}: the append should still have been running; {err}"
    assert err.startswith("interrupted:") and err.count("\n") == 1, err
    assert castable.open_table(uri).version == 0


def test_info_shows_the_settings_in_force_and_the_key_as_not_null(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    uri = str(tmp_path / "t")
    run("create", uri, "--like", str(inputs[0]), "-k", "id", "-p", "history.retain-versions=7")
    doc = run_json("info", uri)
    assert doc["properties"] == {"history.retain-versions": "7"}
    assert doc["settings"]["history.retain-versions"] == "7" and doc["settings"]["gc.orphan-grace-seconds"] == "86400"
    assert [c["nullable"] for c in doc["schema"] if c["name"] == "id"] == [False]
    text = run("info", uri)
    assert "settings in force" in text and "history.retain-versions" in text and "default" in text
    assert doc["notes"] == []
    seconds = str(tmp_path / "seconds")
    run("create", seconds, "--schema", "id:int64, at:timestamp[s, tz=UTC]")
    assert "castable alter TABLE --widen 'at:timestamp[us, tz=UTC]'" in run_json("info", seconds)["notes"][0]
    assert cli("info", seconds).stderr.startswith("note: column 'at' is timestamp[s, tz=UTC]")
    run("alter", seconds, "--widen", "at:timestamp[us, tz=UTC]")
    assert run_json("info", seconds)["notes"] == []


def _interrupt(*_: object, **__: object) -> None:
    """Ctrl-C here: the SIGINT a terminal sends, handled as the entry point handles it."""
    signal.raise_signal(signal.SIGINT)


@pytest.mark.parametrize(
    ("stage", "target", "says", "version"),
    [
        ("before the commit (writing files)", "castable.ops.writes.write_files", "interrupted: not committed", 0),
        (
            "during it, once its manifest landed",
            "castable.commit.protocol.advance_pointer",
            "interrupted: committed as version 1",
            1,
        ),
        ("after it, while printing", "castable.cli.common.emit", "interrupted: committed as version 1", 1),
    ],
)
def test_ctrl_c_at_each_stage_of_an_append_says_the_truth(
    tmp_path: Path,
    inputs: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    stage: str,
    target: str,
    says: str,
    version: int,
) -> None:
    """Ctrl-C says what became of the command's commit, from its own knowledge or the table's log;
    the commit id it names (one the command made up when none was given) commits it once."""
    uri = str(tmp_path / "t")
    run("create", uri, "--like", str(inputs[0]), "-k", "id")
    with monkeypatch.context() as patched:
        patched.setattr(target, _interrupt)
        err = cli("append", uri, str(inputs[0]), code=130).stderr
    assert err.startswith(says) and err.count("\n") == 1, (stage, err)
    assert castable.open_table(uri).version == version
    commit_id = err.split("commit id ")[1].split()[0].rstrip(");")
    assert castable.open_table(uri).committed_version(commit_id) == (1 if version else None)
    run("append", uri, str(inputs[0]), "--commit-id", commit_id)
    run("append", uri, str(inputs[0]), "--commit-id", commit_id)
    assert castable.open_table(uri).version == 1 and run("scan", uri, "--count").strip() == "500"


def test_ctrl_c_on_a_command_that_commits_nothing_says_nothing(
    tmp_path: Path, inputs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = str(tmp_path / "t")
    run("create", uri, "--like", str(inputs[0]), "-k", "id")
    run("append", uri, str(inputs[0]))
    monkeypatch.setattr("castable.cli.reads._print_rows", _interrupt)
    assert cli("scan", uri, code=130).stderr == ""


def test_cli_restore(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    uri = str(tmp_path / "t")
    run("create", uri, "--like", str(inputs[0]), "-k", "id")
    run("append", uri, str(inputs[0]))
    run("delete", uri, "id < 100")
    restored = run_json("restore", uri, "1", "--commit-id", "undo-delete")
    assert restored["version"] == 3 and restored["summary"]["restored_version"] == 1
    assert "already committed as version 3" in run("restore", uri, "1", "--commit-id", "undo-delete")
    assert run("scan", uri, "--count").strip() == "500"
    assert "a version or as_of" in fails("restore", uri)


def test_cli_upsert_and_overwrite(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    uri = str(tmp_path / "t")
    run("create", uri, "--schema", "id:int64, category:string, value:double", "-k", "id")
    (tmp_path / "day1.csv").write_text("id,category,value\n1,a,1.0\n2,b,2.0\n3,a,3.0\n")
    (tmp_path / "fix.csv").write_text("id,category,value\n2,b,20.0\n4,b,40.0\n")
    (tmp_path / "a.csv").write_text("id,category,value\n9,a,9.0\n")
    run("append", uri, str(tmp_path / "day1.csv"))
    upserted = run_json("upsert", uri, str(tmp_path / "fix.csv"), "--commit-id", "fix-1")
    assert upserted["summary"]["rows_added"] == 2
    assert "already committed" in run("upsert", uri, str(tmp_path / "fix.csv"), "--commit-id", "fix-1")
    run("overwrite", uri, str(tmp_path / "a.csv"), "--where", "category = 'a'")
    got = json.loads(run("scan", uri, "--json"))["rows"]
    assert sorted((r["id"], r["value"]) for r in got) == [(2, 20.0), (4, 40.0), (9, 9.0)]
    assert "do not match" in fails("overwrite", uri, str(tmp_path / "fix.csv"), "--where", "category = 'a'")
    (tmp_path / "twice.csv").write_text("id,category,value\n5,a,1\n5,a,2\n")
    assert "key 5 more than once" in fails("upsert", uri, str(tmp_path / "twice.csv"))
    run("overwrite", uri, str(tmp_path / "a.csv"))
    assert run("scan", uri, "--count").strip() == "1"


def test_cli_update_and_change_feed_upsert(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    run("create", uri, "--schema", "id:int64, status:string, amount:double, day:date32", "-k", "id")
    (tmp_path / "orders.csv").write_text("id,status,amount,day\n1,open,10,2026-11-20\n2,open,20,2026-11-21\n")
    run("append", uri, str(tmp_path / "orders.csv"))
    updated = run_json("update", uri, "status='closed'", "amount = amount * 1.5", "--where", "id = 2", "--json")
    assert updated["summary"]["rows_updated"] == 1
    said = run("update", uri, "status='x'", "--where", "id > 10")
    assert "no row matched; nothing committed, the table stays at version 2" in said
    run("update", uri, "day='2026-11-22'", "--where", "status = 'open'")
    rows = {r["id"]: r for r in json.loads(run("scan", uri, "--json"))["rows"]}
    assert rows[2]["status"] == "closed" and rows[2]["amount"] == 30.0 and rows[1]["day"] == "2026-11-22"
    assert "cannot set the primary key 'id'" in fails("update", uri, "id=id+1")
    assert "column=expression" in fails("update", uri, "status")
    assert "gives string" in fails("update", uri, "amount=status")
    (tmp_path / "feed.csv").write_text(
        "id,status,amount,day,op\n1,open,11,2026-11-20,u\n1,,0,,d\n3,new,5,2026-11-23,c\n"
    )
    run("upsert", uri, str(tmp_path / "feed.csv"), "--op-column", "op", "--last-wins")
    assert sorted(r["id"] for r in json.loads(run("scan", uri, "--json"))["rows"]) == [2, 3]
    assert "missing column(s) ['op']" in fails("upsert", uri, str(tmp_path / "orders.csv"), "--op-column", "op")


def test_cli_alter_changes_the_schema_in_one_commit(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    uri = str(tmp_path / "t")
    run("create", uri, "--like", str(inputs[0]), "--primary-key", "id")
    run("append", uri, str(inputs[0]))
    doc = run_json("alter", uri, "--add", "note:string", "--default", "note=n/a", "--rename", "value=amount")
    assert doc["summary"] == {"changes": ["add note string", "rename value to amount"]}
    info = run_json("info", uri)
    assert [(c["name"], c["id"]) for c in info["schema"]] == [
        ("id", 1),
        ("category", 2),
        ("amount", 3),
        ("note", 4),
    ]
    assert run("scan", uri, "--filter", "amount > 249", "--count").strip() == "1"
    assert "n/a" in run("scan", uri, "--limit", "1")
    assert "only widening" in fails("alter", uri, "--widen", "amount:float")
    assert "primary key" in fails("alter", uri, "--drop", "id")
    assert "is not NAME:TYPE" in fails("alter", uri, "--add", "oops")
    assert castable.open_table(uri).version == 2
    wider = tmp_path / "wider.parquet"
    pq.write_table(pa.table({"id": [900], "amount": [1.0], "source": ["cli"]}), wider)
    assert "unknown columns ['source']" in fails("append", uri, str(wider))
    assert "--schema-mode must be" in fails("append", uri, str(wider), "--schema-mode", "loose")
    doc = run_json("append", uri, str(wider), "--schema-mode", "merge")
    assert doc["summary"]["columns_added"] == ["source"]
    assert run("scan", uri, "--filter", "source = 'cli'", "--count").strip() == "1"


def test_db_commands(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    db = str(tmp_path / "shop")
    assert run_json("db", "create", db)["version"] == 0
    made = run_json(
        "db", "create-table", db, "orders", "--schema", "id:int64, category:string, value:float64", "-k", "id"
    )
    assert made == {"uri": Path(db, "orders").as_uri(), "database_version": 1, "version": 0}
    run("db", "create-table", db, "lines", "--schema", "order_id:int64")
    run("append", f"{db}/orders", str(inputs[0]))
    assert run_json("db", "tables", db) == {"version": 3, "tables": {"lines": 0, "orders": 1}}
    history = run_json("db", "history", db, "--limit", "1")
    assert [(h["version"], h["operation"], list(h["tables"])) for h in history] == [(3, "append", ["orders"])]
    now = run_json("db", "snapshot", db, "--count")
    assert now["rows"] == {"lines": 0, "orders": 500}
    assert run_json("db", "snapshot", db, "--version", "2", "--count")["rows"] == {"lines": 0, "orders": 0}
    assert "orders" in run("db", "tables", db) and "create_table" in run("db", "history", db)
    assert "not a table name inside the database" in fails("db", "create-table", db, "../x", "--schema", "a:int64")
    assert "no castable database" in fails("db", "tables", str(tmp_path / "nothing"))
    assert "already has a table 'orders'" in fails("db", "create-table", db, "orders", "--schema", "a:int64")
    assert run_json("db", "drop-table", db, "lines", "--yes") == {"table": "lines", "database_version": 4}
    assert run_json("db", "tables", db) == {"version": 4, "tables": {"orders": 1}}
    assert "no table 'lines'" in fails("db", "drop-table", db, "lines", "--yes")


def test_changes(tmp_path: Path) -> None:
    """``castable changes``: a table, JSON, JSON Lines, a Parquet file, and a refused range."""
    uri = str(tmp_path / "t")
    run("create", uri, "--schema", "id:int64,name:string", "-k", "id")
    (tmp_path / "a.csv").write_text("id,name\n1,a\n2,b\n")
    (tmp_path / "b.csv").write_text("id,name\n1,A\n8,h\n")
    run("append", uri, str(tmp_path / "a.csv"))
    run("upsert", uri, str(tmp_path / "b.csv"))
    assert "update_postimage" in run("changes", uri, "--from", "1")
    doc = json.loads(run("changes", uri, "--from", "2", "--json"))
    assert [r["_change_type"] for r in doc["rows"]] == ["update_preimage", "update_postimage", "insert"]
    lines = run("changes", uri, "--from", "1", "--format", "jsonl", "--filter", "id = 8").splitlines()
    assert [json.loads(line)["_change_type"] for line in lines] == ["insert"]
    out = tmp_path / "c.parquet"
    run("changes", uri, "--from", "1", "--to", "2", "--output", str(out), "--columns", "id")
    got = pq.read_table(out)
    assert got.column_names == ["id", "_change_type", "_commit_version", "_commit_timestamp"]
    assert got.column("_commit_version").to_pylist() == [1, 1, 2, 2, 2]
    assert json.loads(run("changes", uri, "--from", "3", "--count", "--json"))["count"] == 0
    assert "after end version" in fails("changes", uri, "--from", "2", "--to", "1")
    assert "must be one of" in fails("changes", uri, "--from", "1", "--format", "xml")


def test_db_changes(tmp_path: Path) -> None:
    """``castable db changes``: a member's changes numbered by database version."""
    uri = str(tmp_path / "db")
    run("db", "create", uri)
    run("db", "create-table", uri, "orders", "--schema", "id:int64,qty:int64", "-k", "id")
    run("db", "create-table", uri, "lines", "--schema", "id:int64")
    (tmp_path / "a.csv").write_text("id,qty\n1,5\n")
    run("append", f"{uri}/orders", str(tmp_path / "a.csv"))
    run("upsert", f"{uri}/orders", str(tmp_path / "a.csv"))
    doc = json.loads(run("db", "changes", uri, "orders", "--from", "0", "--json"))
    assert [(r["_commit_version"], r["_change_type"]) for r in doc["rows"]] == [
        (3, "insert"),
        (4, "update_preimage"),
        (4, "update_postimage"),
    ]
    assert json.loads(run("db", "changes", uri, "lines", "--from", "3", "--count", "--json"))["count"] == 0
    assert "no table" in fails("db", "changes", uri, "nope", "--from", "0")


def test_cli_on_s3(s3_bucket: str, s3_endpoint: str, inputs: tuple[Path, Path]) -> None:
    uri = f"s3://{s3_bucket}/cli"
    opt = ["-o", f"endpoint_url={s3_endpoint}"]
    run("create", uri, "--like", str(inputs[0]), *opt)
    run("append", uri, str(inputs[0]), *opt)
    assert run("scan", uri, "--count", *opt).strip() == "500"
