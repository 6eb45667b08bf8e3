"""Lambda bundle size and cold import times, built exactly as the CDK app bundles it.

Builds the bundle with infra.bundle.install (pip, manylinux_2_28 x86_64 wheels for
CPython 3.12, no Docker) into a temporary directory, reports its unzipped size against
Lambda's 250 MiB limit, and the cold import time of each handler module from the bundle alone
(median of 5 fresh python3.12 interpreters run with -I -S and only the bundle on sys.path, as
the Lambda runtime imports it).

Usage: python -m bench bundle-size   (writes bench/results/bundle.md)
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common.benchlib import publish
from infra.bundle import install

HANDLERS = ["commit", "tombstone", "splice", "ingest", "maintenance", "erasure", "trigger", "catalog"]
LIMIT = 250 * 1024 * 1024
PYTHON312 = Path(os.environ.get("CASTABLE_PYTHON312", Path.home() / ".pyenv/versions/3.12.1/bin/python3.12"))


def tree_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def cold_import(bundle: Path, module: str) -> float:
    env = {"PATH": "/usr/bin:/bin", "POWERTOOLS_TRACE_DISABLED": "true", "AWS_DEFAULT_REGION": "us-east-1"}
    code = f"import sys; sys.path.insert(0, {str(bundle)!r}); import {module}"
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([str(PYTHON312), "-I", "-S", "-c", code], check=True, env=env, cwd=bundle)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="castable-bundle-"))
    try:
        t0 = time.perf_counter()
        install(work)
        build_s = time.perf_counter() - t0
        size = tree_size(work)
        biggest = sorted(((tree_size(p), p.name) for p in work.iterdir() if p.is_dir()), reverse=True)[:6]
        baseline = cold_import(work, "json")
        imports = {h: cold_import(work, f"lambdas.{h}") - baseline for h in HANDLERS}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = [
        "# Lambda bundle",
        "",
        f"Built in {build_s:.0f} s without Docker: **{size / 2**20:.0f} MiB unzipped** "
        f"({size / LIMIT:.0%} of Lambda's 250 MiB limit), numpy included.",
        "",
        "| largest packages | MiB |",
        "| --- | ---: |",
        *(f"| {name} | {n / 2**20:.1f} |" for n, name in biggest),
        "",
        f"Cold import of each handler module from the bundle alone under python3.12 -I -S (median of 5 new "
        f"interpreters, minus {baseline * 1000:.0f} ms of interpreter start-up):",
        "",
        "| handler | import |",
        "| --- | ---: |",
        *(f"| lambdas.{h} | {seconds * 1000:.0f} ms |" for h, seconds in imports.items()),
    ]
    publish("bundle", lines)


if __name__ == "__main__":
    main()
