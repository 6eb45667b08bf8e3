"""``python -m bench`` reaches every benchmark: each module of bench/'s theme packages is a
benchmark of the runner (in its theme's folder, named as the runner names it) or a helper one of
them runs, every module imports another by its full name, and no docstring points at an issue."""

from __future__ import annotations

import ast
import re
import runpy
import subprocess
import sys

from helpers import ROOT

BENCH = ROOT / "bench"
RUNNER = runpy.run_path(str(BENCH / "__main__.py"))
MODULES = sorted(p for p in BENCH.glob("**/*.py") if "results" not in p.parts)


def test_every_script_is_a_benchmark_or_a_helper() -> None:
    scripts = {
        p.relative_to(BENCH).as_posix()
        for p in BENCH.glob("*/*.py")
        if p.parent.name not in ("compare", "results") and p.name != "__init__.py"
    }
    benchmarks = {b.script for b in RUNNER["BENCHMARKS"].values()}
    helpers = set(RUNNER["HELPERS"])
    assert not benchmarks & helpers
    assert scripts == benchmarks | helpers, f"unlisted: {sorted(scripts - benchmarks - helpers)}"
    assert {p.name for p in BENCH.glob("*.py")} == {"__init__.py", "__main__.py"}, "a module outside the themes"


def test_a_benchmark_is_its_themes_folder_and_its_name() -> None:
    folders: dict[str, set[str]] = {}
    for name, b in RUNNER["BENCHMARKS"].items():
        folder, file = b.script.split("/")
        assert file == f"{name.replace('-', '_')}.py", name
        assert b.module == f"bench.{folder}.{name.replace('-', '_')}"
        folders.setdefault(b.theme, set()).add(folder)
    assert all(len(f) == 1 for f in folders.values()), folders
    for (folder,) in folders.values():
        assert (BENCH / folder / "__init__.py").exists(), folder
    assert (BENCH / "__init__.py").exists() and (BENCH / "common" / "__init__.py").exists()


def test_modules_import_each_other_by_full_name() -> None:
    """One import style, whether a module runs through the runner, in a side venv or under a
    test: ``from bench.common.benchlib import ...``, never ``from benchlib import ...`` nor a
    relative import."""
    names = {p.stem for p in MODULES} | {p.parent.name for p in MODULES if p.parent != BENCH}
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{path}: relative import"
                tops = [node.module.split(".")[0]] if node.module else []
            elif isinstance(node, ast.Import):
                tops = [a.name.split(".")[0] for a in node.names]
            else:
                continue
            assert not set(tops) & names, f"{path}: imports {tops} (bench.… is the full name)"


def test_make_bench_runs_the_runner() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\nbench:", 1)[1].split("\n\n", 1)[0]
    assert "-m bench --all" in recipe and ".py" not in recipe


def test_no_benchmark_docstring_names_an_issue() -> None:
    for path in MODULES:
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        assert not re.search(r"\bissue \d+", doc), path


def test_the_runner_lists_by_theme_and_refuses_an_unknown_name() -> None:
    listed = subprocess.run([sys.executable, "-m", "bench"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert "reads and writes:" in listed.stdout and "shaped" in listed.stdout
    unknown = subprocess.run([sys.executable, "-m", "bench", "nope"], cwd=ROOT, capture_output=True, text=True)
    assert unknown.returncode == 2 and "no benchmark 'nope'" in unknown.stderr
