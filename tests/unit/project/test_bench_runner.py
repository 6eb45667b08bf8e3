"""``python -m bench`` reaches every benchmark: each script of bench/ is a benchmark of the
runner (with its theme) or a helper one of them runs, and no docstring points at an issue."""

from __future__ import annotations

import ast
import re
import runpy
import subprocess
import sys

from helpers import ROOT

BENCH = ROOT / "bench"
RUNNER = runpy.run_path(str(BENCH / "__main__.py"))


def test_every_script_is_a_benchmark_or_a_helper() -> None:
    scripts = {p.name for p in BENCH.glob("*.py")} - {"__main__.py"}
    benchmarks = {b.script for b in RUNNER["BENCHMARKS"].values()}
    helpers = set(RUNNER["HELPERS"])
    assert not benchmarks & helpers
    assert scripts == benchmarks | helpers, f"unlisted: {sorted(scripts - benchmarks - helpers)}"


def test_make_bench_runs_the_runner() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\nbench:", 1)[1].split("\n\n", 1)[0]
    assert "-m bench --all" in recipe and ".py" not in recipe


def test_no_benchmark_docstring_names_an_issue() -> None:
    for path in [*BENCH.glob("*.py"), *BENCH.glob("compare/*.py")]:
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        assert not re.search(r"\bissue \d+", doc), path


def test_the_runner_lists_by_theme_and_refuses_an_unknown_name() -> None:
    listed = subprocess.run([sys.executable, "-m", "bench"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert "reads and writes:" in listed.stdout and "shaped" in listed.stdout
    unknown = subprocess.run([sys.executable, "-m", "bench", "nope"], cwd=ROOT, capture_output=True, text=True)
    assert unknown.returncode == 2 and "no benchmark 'nope'" in unknown.stderr
