"""castable as a new user installs it: ``pip install .`` (no extras) into a fresh venv, used from
outside the checkout. A module the dev venv happens to provide (numpy through pandas, say) fails here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

SCRIPT = """
import pyarrow as pa, castable
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("at", pa.timestamp("ns"))])
t = castable.create_table("table", schema, primary_key="id")
t.append(pa.table({"id": list(range(100)), "name": [str(i) for i in range(100)],
                   "at": pa.array(list(range(100)), pa.timestamp("ns"))}, schema=schema))
t.delete("id BETWEEN 10 AND 19")
t.delete("name = '50'")
assert t.count() == 89, t.count()
assert t.scan(["id"], "id >= 95").to_arrow().num_rows == 5
t.erase("id = 60", mode="rewrite")
assert castable.open_table("table").count() == 88
stats = t.manifest.data_files[0].stats
assert {"min", "max"} <= set(stats["at"]), f"timestamp[ns] statistics lost without pandas: {stats}"
import sys
assert "pandas" not in sys.modules
print("ok")
"""


@pytest.mark.slow
def test_a_bare_install_works_outside_the_checkout(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(ROOT)], capture_output=True, text=True, timeout=900
    )
    assert install.returncode == 0, install.stderr[-3000:]
    work = tmp_path / "elsewhere"
    work.mkdir()
    run = subprocess.run([str(python), "-I", "-c", SCRIPT], cwd=work, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]
    cli = subprocess.run([str(venv / "bin" / "castable"), "--help"], cwd=work, capture_output=True, text=True)
    assert cli.returncode == 0 and "append" in cli.stdout, cli.stderr[-2000:]
    listed = subprocess.run([str(python), "-m", "pip", "list"], capture_output=True, text=True).stdout
    assert "pandas" not in listed.lower(), "the bare install pulled pandas in"
    marker = subprocess.run(
        [
            str(python),
            "-I",
            "-c",
            "import castable, pathlib; print((pathlib.Path(castable.__file__).parent / 'py.typed').exists())",
        ],
        cwd=work,
        capture_output=True,
        text=True,
    )
    assert marker.stdout.strip() == "True", "the package ships py.typed, so type checkers use its hints"
