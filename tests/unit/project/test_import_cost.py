"""What importing castable costs a command that does not need it: boto3 and sqlglot are imported
on the first S3 store and the first SQL text, not with the library, so ``castable --help`` and a
command on a local table start in about half the time they took when both came with it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HEAVY = ("boto3", "botocore.config", "sqlglot")


def loaded_after(code: str, cwd: Path) -> set[str]:
    """The heavy modules a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport sys\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=cwd, check=True)
    return set(filter(None, done.stdout.strip().split(",")))


def test_the_library_and_its_command_line_import_neither_boto3_nor_sqlglot(tmp_path: Path) -> None:
    assert loaded_after("import castable, castable.cli, castable.store", tmp_path) == set()


def test_a_local_table_written_and_read_by_arrow_expression_needs_neither(tmp_path: Path) -> None:
    code = (
        "import castable, pyarrow as pa, pyarrow.compute as pc\n"
        "t = castable.create_table('t', pa.schema([('id', pa.int64())]), primary_key='id')\n"
        "t.append(pa.table({'id': [1, 2, 3]}))\n"
        "t.delete(pc.field('id') == 2)\n"
        "assert t.to_arrow(filter=pc.field('id') > 1).column('id').to_pylist() == [3]\n"
    )
    assert loaded_after(code, tmp_path) == set()


def test_sql_text_brings_sqlglot_and_an_s3_store_brings_boto3(tmp_path: Path) -> None:
    sql = "import castable, pyarrow as pa\nfrom castable.read.where import parse_predicate\n"
    sql += "parse_predicate('id > 1', pa.schema([('id', pa.int64())]))"
    assert loaded_after(sql, tmp_path) == {"sqlglot"}
    s3 = "from castable.store import make_s3_client\nmake_s3_client({'region_name': 'us-east-1'})"
    assert loaded_after(s3, tmp_path) >= {"boto3", "botocore.config"}
