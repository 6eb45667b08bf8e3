"""What importing castable costs a command that does not need it: boto3 and sqlglot are imported
on the first S3 store and the first SQL text, not with the library; ``import castable`` imports
none of the library (each name on first use), and the command line imports it only in the command
that runs, so ``castable --version`` and ``--help`` import no pyarrow at all; pyarrow.dataset,
which imports pandas when installed, only where a dataset is evaluated (``python -m bench cli``
has the times)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HEAVY = ("boto3", "botocore.config", "sqlglot")
ARROW = ("pyarrow", "numpy", "pandas", "pyarrow.dataset", "castable.table", "castable.commit")


def loaded_after(code: str, cwd: Path, heavy: tuple[str, ...] = HEAVY) -> set[str]:
    """The ``heavy`` modules a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport sys\nprint('\\n' + ','.join(m for m in {heavy!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=cwd, check=True)
    return set(filter(None, done.stdout.splitlines()[-1].split(",")))


def test_the_library_and_its_command_line_import_neither_boto3_nor_sqlglot(tmp_path: Path) -> None:
    assert loaded_after("import castable, castable.cli, castable.store", tmp_path) == set()


def command(*args: str) -> str:
    """Code that runs the command line as the installed ``castable`` does, with ``args``."""
    run = "from castable.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass"
    return f"import sys\nsys.argv = ['castable', *{list(args)!r}]\n{run}"


def test_version_and_help_import_no_arrow_and_no_library(tmp_path: Path) -> None:
    assert loaded_after("import castable", tmp_path, ARROW) == set()
    for args in (["--version"], ["--help"], ["scan", "--help"], ["db", "create-table", "--help"]):
        assert loaded_after(command(*args), tmp_path, ARROW) == set(), args


def test_a_cli_append_of_a_parquet_file_imports_neither_pandas_nor_datasets(tmp_path: Path) -> None:
    setup = (
        "import castable, pyarrow as pa, pyarrow.parquet as pq\n"
        "castable.create_table('t', pa.schema([('id', pa.int64())]))\n"
        "pq.write_table(pa.table({'id': [1, 2]}), 'f.parquet')\n"
    )
    subprocess.run([sys.executable, "-c", setup], cwd=tmp_path, check=True)
    assert loaded_after(command("append", "t", "f.parquet"), tmp_path, ("pyarrow.dataset", "sqlglot")) == set()


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


def test_every_public_name_is_exported_lazily_from_where_it_is_defined() -> None:
    """``castable``'s three lists of its names agree: what type checkers import, what the first
    use imports (the table in its source) and ``__all__``; each name resolves to the object its
    module defines."""
    import ast
    import importlib

    import castable

    tree = ast.parse(Path(castable.__file__).read_text())
    checked = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    typed = {(node.module, a.name) for node in checked.body if isinstance(node, ast.ImportFrom) for a in node.names}
    table = next(n.value for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "_EXPORTS")
    exports: dict[str, str] = ast.literal_eval(table)
    assert typed == {(module, name) for name, module in exports.items()}
    assert set(castable.__all__) == set(exports)
    for name, module in exports.items():
        assert getattr(castable, name) is getattr(importlib.import_module(module), name), name
