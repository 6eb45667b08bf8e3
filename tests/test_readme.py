"""The README's tour and CLI section run top to bottom as written, so they cannot drift."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def block(section: str, language: str) -> str:
    """The first ``language`` code block after the heading ``section``."""
    text = README.read_text()
    start = text.index(f"\n{section}\n") if section.startswith("#") else text.index(f"\n{section} ")
    found = re.compile(rf"```{language}\n(.*?)```", re.S).search(text, start)
    assert found is not None, f"no {language} block after {section}"
    return found.group(1)


def test_python_tour_runs_as_written(tmp_path: Path) -> None:
    script = tmp_path / "tour.py"
    script.write_text(block("## Five-minute tour: the Python API", "python"))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == str(
        [{"id": 5, "amount": 2.5}, {"id": 6, "amount": 4.0}, {"id": 8, "amount": 8.0}, {"id": 9, "amount": 9.0}]
    )
    assert lines[1:3] == ["[(4,)]", "3"]
    assert "'verified': True" in done.stdout


def test_cli_section_runs_as_written(tmp_path: Path) -> None:
    script = tmp_path / "tour.sh"
    script.write_text(block("## The CLI", "bash"))
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "TMPDIR": str(tmp_path),
    }
    done = subprocess.run(
        ["bash", "-euo", "pipefail", str(script)], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "already committed as version 1" in done.stdout
    assert '{"version": 3, "count": 3}' in done.stdout
    assert "is not damaged" in done.stdout


def test_database_section_runs_as_written(tmp_path: Path) -> None:
    section = "## Databases: several tables, one commit"
    script = tmp_path / "db.py"
    script.write_text(block(section, "python"))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["1", "3", "{'lines': 2, 'orders': 2} 1", "[9.5]", "2 append"]
    shell = tmp_path / "db.sh"
    shell.write_text(block(section, "bash"))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", str(shell)], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "created table" in done.stdout and "database version 2" in done.stdout


def test_isolation_example_runs_after_the_database_section(tmp_path: Path) -> None:
    """The ``db.run`` example continues the database section's script."""
    script = tmp_path / "run.py"
    script.write_text(block("## Databases: several tables, one commit", "python") + block("**Isolation.**", "python"))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "5.0"


def test_change_feed_section_runs_as_written(tmp_path: Path) -> None:
    """The bronze-to-silver consumer: silver holds bronze's rows, a repeated sync commits
    nothing, and the feed shows the update's pair and the delete (the compaction gives nothing)."""
    script = tmp_path / "feed.py"
    script.write_text(block("## Change feed: what changed since you last looked", "python"))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "2 2",
        "[{'id': 1, 'amount': 10.0}, {'id': 2, 'amount': 25.0}]",
        "[{'id': 2, 'amount': 20.0, '_change_type': 'update_preimage'}, "
        "{'id': 2, 'amount': 25.0, '_change_type': 'update_postimage'}, "
        "{'id': 3, 'amount': 30.0, '_change_type': 'delete'}]",
    ]


def test_catalog_section_runs_as_written(tmp_path: Path) -> None:
    """pyiceberg writes through the served catalog, castable reads and writes the same table,
    and pyiceberg sees castable's commit under castable's version number."""
    script = tmp_path / "catalog.py"
    script.write_text(block("## Every Iceberg engine writes: the REST catalog", "python"))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "[{'id': 1, 'amount': 10.0}, {'id': 3, 'amount': 30.0}]",
        "['overwrite', 'append', 'create']",
        "1 True",
    ]
