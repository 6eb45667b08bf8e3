"""The documentation's pages (README.md and docs/**/*.md), their fenced code blocks and how a
reader runs them, for the tests that run every block; and the site's strict build."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from helpers import ROOT

KINDS = {"python": "python", "py": "python", "bash": "shell", "sh": "shell", "shell": "shell", "console": "shell"}
"""The languages of code that runs, and how: as a Python script, or as a bash script."""
NOT_CODE = {"", "text", "json", "yaml", "toml", "sql", "mermaid"}
"""Languages of what a page shows (layouts, output, configuration, SQL for other engines, a diagram)."""
FENCE = re.compile(r"^(?P<indent> *)(?P<marker>```+|~~~+)\s*(?P<language>[^\s`]*)")
NOT_RUN = re.compile(r"^\s*<!-- not run: (?P<reason>.+?) -->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its code, and why it is not run, if it says so."""

    page: str
    line: int
    language: str
    code: str
    not_run: str | None

    @property
    def kind(self) -> str | None:
        """``python`` or ``shell`` for code that runs, ``None`` for what a page only shows."""
        return KINDS.get(self.language)

    def __str__(self) -> str:
        return f"{self.page}:{self.line} ({self.language or 'no language'})"


@dataclass(frozen=True)
class Section:
    """The first ``language`` block after the heading ``heading`` of ``page``: how a test names
    the example it runs, so it still finds it when the page around it changes."""

    page: str
    heading: str
    language: str

    def block(self) -> Block:
        lines = (ROOT / self.page).read_text().splitlines()
        start = lines.index(self.heading)
        found = [b for b in blocks(self.page) if b.line > start and b.language == self.language]
        assert found, f"no {self.language} block after {self.heading!r} in {self.page}"
        return found[0]


def pages() -> list[str]:
    """Every page, relative to the repository: the README and the site's Markdown."""
    return ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md"))]


def blocks(page: str) -> list[Block]:
    """The fenced blocks of ``page`` in order, each dedented by its fence's indentation."""
    lines = (ROOT / page).read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        indent, marker = fence["indent"], fence["marker"]
        end = next(j for j in range(i + 1, len(lines)) if closes(lines[j], marker))
        above = NOT_RUN.match(lines[i - 1]) if i > 0 else None
        code = "".join(line.removeprefix(indent) + "\n" for line in lines[i + 1 : end])
        found.append(Block(page, i + 1, fence["language"], code, above["reason"] if above else None))
        i = end + 1
    return found


def closes(line: str, marker: str) -> bool:
    """Whether ``line`` closes a block opened by ``marker``: the same character, at least as many."""
    closing = line.strip()
    return set(closing) == {marker[0]} and len(closing) >= len(marker)


def run(examples: list[Block], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run ``examples`` in order as a reader would, in ``cwd``: one Python script of this
    interpreter, in which each shell block runs at its place with ``bash -euo pipefail`` (so
    Python blocks continue each other around it), with this interpreter's bin folder (castable,
    spark-submit) first on PATH and ``cwd`` as TMPDIR."""
    parts = ["import subprocess as _shell\n"]
    for example in examples:
        assert example.kind is not None, f"{example} is not code that runs"
        shell = f"_shell.run(['bash', '-euo', 'pipefail', '-c', {example.code!r}], check=True)\n"
        parts.append(example.code if example.kind == "python" else shell)
    script = cwd / "example.py"
    script.write_text("".join(parts))
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = {**os.environ, "PATH": path, "TMPDIR": str(cwd), "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [sys.executable, str(script)], cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout
    )


def build_site(destination: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of mkdocs.yml into ``destination``, as ``make docs`` runs it."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "--site-dir", str(destination)]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)
