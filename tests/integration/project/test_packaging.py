"""castable as a user installs it: the wheel and the sdist built from a checkout, the README's own
install lines run by pip into fresh venvs, and every extra installed alone beside the built wheel
and made to run the code it exists for, from outside the checkout. A module the dev venv happens
to provide (pandas through another package, say) fails here."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import ROOT
from helpers.docs import Section

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("packaging")]

INSTALL = Section("README.md", "## Install", "bash")
"""The README's install lines, which this module runs (tests/integration/project/test_docs.py does not)."""
UV = ROOT / ".tools" / "uv" / "bin" / "uv"

TABLE = """
import pyarrow as pa, castable
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("at", pa.timestamp("us"))])
t = castable.create_table("table", schema, primary_key="id")
t.append(pa.table({"id": list(range(100)), "name": [str(i) for i in range(100)],
                   "at": pa.array(list(range(100)), pa.timestamp("us"))}, schema=schema))
"""

BARE = (
    TABLE
    + """
t.delete("id BETWEEN 10 AND 19")
t.delete("name = '50'")
assert t.count() == 89, t.count()
assert t.scan(["id"], "id >= 95").to_arrow().num_rows == 5
t.erase("id = 60", mode="rewrite")
assert castable.open_table("table").count() == 88
stats = t.manifest.data_files[0].stats
assert {"min", "max"} <= set(stats["at"]), f"timestamp statistics lost without pandas: {stats}"
import sys
assert "pandas" not in sys.modules
"""
)

RUNS = {
    "pandas": TABLE
    + """
import pandas as pd
t.append(pd.DataFrame({"id": [100, 101], "name": ["a", "b"], "at": pd.to_datetime([0, 1], unit="us")}))
frame = t.scan().to_pandas()
assert len(frame) == 102 and sorted(frame["id"])[-1] == 101
""",
    "polars": TABLE
    + """
import polars as pl
assert t.scan(["id"], "id < 5").to_polars()["id"].sort().to_list() == [0, 1, 2, 3, 4]
""",
    "duckdb": TABLE
    + """
con = t.scan(["id"]).to_duckdb("t")
assert con.sql("select count(*), sum(id) from t").fetchall() == [(100, 4950)]
""",
    "iceberg": TABLE
    + """
from castable.iceberg import publish
from pyiceberg.table import StaticTable
assert StaticTable.from_metadata(publish(t)).scan().to_arrow().num_rows == 100
""",
    "catalog": TABLE
    + """
import os
from pyiceberg.catalog.rest import RestCatalog
from castable.catalog import Access, Catalog, Warehouse
from castable.catalog.server import make_server
os.makedirs("wh/db")
os.rename("table", "wh/db/t")
server = make_server(Catalog(Warehouse.at("wh")), port=0, access=Access.from_token("a-secret-of-24-characters"))
server.start()
uri = f"http://127.0.0.1:{server.port}"
tokens = {"oauth2-server-uri": f"{uri}/v1/oauth/tokens"}
client = RestCatalog("c", uri=uri, credential="token:a-secret-of-24-characters", **tokens)
assert client.load_table("db.t").scan().to_arrow().num_rows == 100
server.shutdown()
""",
    "spark": TABLE
    + """
import os
from pyspark.sql import SparkSession
from castable.spark import register
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
register(spark)
uri = os.path.abspath("table")
rows = spark.createDataFrame([(200, "x", None), (201, "y", None)], "id long, name string, at timestamp_ntz")
rows.write.format("castable").mode("append").save(uri)
assert castable.open_table(uri).count() == 102
assert spark.read.format("castable").load(uri).where("id >= 200").count() == 2
""",
}
"""One thing per library extra, run with that extra alone: the code it exists for."""

CHECKOUT_RUNS = {
    extra: "import importlib, pathlib\n"
    f"for p in sorted(pathlib.Path({folder!r}).glob('*.py')):\n"
    f"    importlib.import_module(f'{folder}.{{p.stem}}')\n" + extra_lines
    for extra, folder, extra_lines in [("lambda", "lambdas", ""), ("cdk", "infra", "import app\n")]
}
"""The extras of code that lives in the checkout, not the wheel (the Lambda handlers, the CDK app):
their modules import with that extra alone, run from the checkout as a deployer runs them."""

ELSEWHERE = {
    "emr": "tests/integration/spark/test_emr_env.py",
    "dev": "Makefile",
}
"""Extras whose whole use another part of the suite makes: the EMR archive is built from the
``emr`` extra and its job run by spark-submit with nothing else; ``dev`` is the venv every test
and the lint run in."""


@dataclass(frozen=True)
class Dist:
    wheel: Path
    sdist: Path


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What a clone of this tree holds: its tracked and unignored files, nothing built."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    target = tmp_path_factory.mktemp("checkout")
    for name in filter(None, (n.decode() for n in listed)):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            (target / name).write_bytes(source.read_bytes())
    return target


@pytest.fixture(scope="module")
def dist(checkout: Path) -> Dist:
    """``make dist``: the sdist, and the wheel built from it."""
    assert UV.exists(), f"{UV} is missing: make test bootstraps it"
    built = subprocess.run(["make", "dist", f"UV={UV}"], cwd=checkout, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = (checkout / "dist").glob("castable-*.whl")
    (sdist,) = (checkout / "dist").glob("castable-*.tar.gz")
    return Dist(wheel, sdist)


def venv(path: Path) -> Path:
    """A fresh venv with pip, as ``python -m venv`` makes it; its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    return path / "bin" / "python"


def run(python: Path, script: str | Path, cwd: Path, timeout: float = 600) -> None:
    """``script`` (code, or a file's path) by ``python`` in ``cwd``, its venv activated (Spark starts its Python workers
    from PATH)."""
    cwd.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "VIRTUAL_ENV": str(python.parents[1]),
        "PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}",
    }
    done = subprocess.run(
        [str(python), *(["-c", script] if isinstance(script, str) else [str(script)])],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]


def readme_extras() -> set[str]:
    """The extras the README's install table names."""
    lines = (ROOT / "README.md").read_text().splitlines()
    start = lines.index(INSTALL.heading)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("## "))
    return {m.group(1) for line in lines[start:end] if (m := re.match(r"\| `(\w+)` \|", line))}


def test_the_wheel_and_sdist_hold_the_package_and_nothing_else(dist: Dist) -> None:
    with zipfile.ZipFile(dist.wheel) as wheel:
        names = wheel.namelist()
        entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        entry_points = wheel.read(entry).decode()
    assert "castable/py.typed" in names, "the package ships py.typed, so type checkers use its hints"
    assert "castable/spark/digest.py" in names and "castable/catalog/server.py" in names
    assert not [n for n in names if n.split("/")[0] in {"tests", "lambdas", "infra", "bench", "jobs"}], names
    assert "castable = castable.cli:main" in entry_points
    with tarfile.open(dist.sdist) as sdist:
        members = sdist.getnames()
    assert any(m.endswith("/pyproject.toml") for m in members) and any(m.endswith("/README.md") for m in members)


def test_the_readme_install_lines_work_outside_the_checkout(checkout: Path, tmp_path: Path) -> None:
    """Each line of the README's install block, run as written by a fresh venv's pip in the
    checkout; the bare one then works from elsewhere with no pandas, its command included, and
    runs the demo (which ``make demo`` runs with castable alone)."""
    lines = [line.split("#")[0].strip() for line in INSTALL.block().code.splitlines()]
    installs = [shlex.split(line) for line in lines if line]
    assert installs and all(words[:2] == ["pip", "install"] for words in installs), installs
    for n, words in enumerate(installs):
        python = venv(tmp_path / f"venv{n}")
        done = subprocess.run(
            [str(python), "-m", *words, "--quiet"], cwd=checkout, capture_output=True, text=True, timeout=900
        )
        assert done.returncode == 0, f"{' '.join(words)}: {done.stderr[-3000:]}"
        if words[2:] == ["."]:
            run(python, BARE, tmp_path / "elsewhere")
            cli = subprocess.run([str(python.parent / "castable"), "--help"], capture_output=True, text=True)
            assert cli.returncode == 0 and "append" in cli.stdout, cli.stderr[-2000:]
            listed = subprocess.run([str(python), "-m", "pip", "list"], capture_output=True, text=True).stdout
            assert "pandas" not in listed.lower(), "the bare install pulled pandas in"
            run(python, checkout / "examples" / "demo.py", checkout)  # make demo's, castable alone
            assert (checkout / "demo-table" / "_latest_manifest").exists()
    assert ["pip", "install", "."] in installs, "the README shows the bare install"


def test_the_readme_lists_every_extra_and_each_is_checked() -> None:
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    assert readme_extras() == extras, "the README's install table and pyproject.toml's extras differ"
    assert set(RUNS) | set(CHECKOUT_RUNS) | set(ELSEWHERE) == extras
    assert all((ROOT / test).exists() for test in ELSEWHERE.values())


def with_extra(extra: str, dist: Dist, path: Path) -> Path:
    """A fresh venv holding the built wheel with ``extra`` and nothing else (uv, for speed: the
    README's pip lines run above); its interpreter."""
    python = path / "bin" / "python"
    subprocess.run([str(UV), "venv", "--quiet", "--python", sys.executable, str(path)], check=True)
    wheel = f"castable[{extra}] @ {dist.wheel.as_uri()}"
    done = subprocess.run(
        [str(UV), "pip", "install", "--quiet", "--python", str(python), wheel],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return python


@pytest.mark.parametrize("extra", sorted(RUNS))
def test_each_library_extra_alone_runs_its_code(extra: str, dist: Dist, tmp_path: Path) -> None:
    run(with_extra(extra, dist, tmp_path / "venv"), RUNS[extra], tmp_path / "elsewhere")


@pytest.mark.parametrize("extra", sorted(CHECKOUT_RUNS))
def test_each_checkout_extra_alone_imports_its_code(extra: str, dist: Dist, checkout: Path, tmp_path: Path) -> None:
    run(with_extra(extra, dist, tmp_path / "venv"), CHECKOUT_RUNS[extra], checkout)
