"""Where a test run's time goes, from pytest's JUnit XML (``pytest --junitxml=run.xml``).

Prints Markdown: the time by tier and theme (the folders of tests/unit and tests/integration),
the files that took longest, and the slowest tests. Each test's time is its setup, call and
teardown, so a session fixture's start (a server, a Spark session, a synth) counts against the
first test that asks for it. With workers, times add up to more than the wall clock.
Usage: ``python tools/test_profile.py run.xml [more.xml ...] [--top 30]``: several reports
(``make test`` leaves one per tier in build/) are read as one run.
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    """One test of the run: its file (under tests/), its name and its seconds."""

    file: str
    name: str
    seconds: float

    @property
    def theme(self) -> str:
        """``unit/<package>`` or ``integration/<theme>``: the file's first two folders."""
        parts = self.file.split("/")
        return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


def cases(path: str) -> list[Case]:
    """The test cases of a JUnit XML report."""
    found = []
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "").split("::")[0]
        file = "/".join(p for p in module.split(".") if not p[:1].isupper())
        found.append(Case(file.removeprefix("tests/"), case.get("name", ""), float(case.get("time", 0))))
    return found


def table(rows: list[tuple[str, float, int]], total: float, heading: str) -> list[str]:
    lines = [f"| {heading} | seconds | share | tests |", "| --- | ---: | ---: | ---: |"]
    lines += [f"| {name} | {secs:,.0f} | {secs / total:.1%} | {count} |" for name, secs, count in rows]
    return lines


def grouped(run: list[Case], key: str) -> list[tuple[str, float, int]]:
    secs: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for case in run:
        group = getattr(case, key)
        secs[group] += case.seconds
        count[group] += 1
    return sorted(((g, secs[g], count[g]) for g in secs), key=lambda r: -r[1])


def report(run: list[Case], top: int) -> str:
    total = sum(c.seconds for c in run) or 1.0
    lines = [f"{len(run):,} tests, {total:,.0f} s of test time in all.", ""]
    lines += [*table(grouped(run, "theme"), total, "tier / theme"), ""]
    lines += [*table(grouped(run, "file")[:top], total, f"the {top} slowest files"), ""]
    lines += [f"| the {top} slowest tests | seconds |", "| --- | ---: |"]
    slowest = sorted(run, key=lambda c: -c.seconds)[:top]
    lines += [f"| `{c.file}::{c.name}` | {c.seconds:,.1f} |" for c in slowest]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    print(report([c for path in args.reports for c in cases(path)], args.top))


if __name__ == "__main__":
    main()
