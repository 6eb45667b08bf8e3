"""CloudFormation template size and resource count against the number of tables, for the per-table
deployment of revision 66afb07: each table gets its own landing queue, dead letters, ingest
function and maintenance schedule, in nested stacks of 30 (infra/ingest.py's ``UNITS_PER_STACK``),
so a fixed-size stack can later be measured beside it.

The revision is checked out as a detached git worktree in a temporary directory (removed at the
end) and synthesised there offline, one synth at a time, each in its own process
(``.venv/bin/python`` with cwd and ``PYTHONPATH`` the worktree and its ``src``, so ``app``,
``infra``, ``lambdas`` and ``castable`` are that revision's), as tests/helpers/cdk.py's ``synth``
does: no bundling (``aws:cdk:bundling-stacks`` empty), ``config`` empty, so the tables are the
``tables`` context, JSON text as ``-c tables='[...]'`` gives it: ``[{"name": "t0001"}, ...]``,
every table with the default schedule and settings. Each row: the main template's bytes
(Castable.template.json as written to the cloud assembly, and minified), the nested templates'
count and total bytes, the resources across all templates (the nested stacks' own
``AWS::CloudFormation::Stack`` resources in the main template included), the most in any one
template (CloudFormation allows 500), the largest template's bytes, the seconds of
``app.build`` + ``synth()`` in the process and of the whole process (Python, jsii and the CDK
library starting included), and whether the main template is over 1,000,000 bytes (CloudFormation
takes a template of at most 1 MB from S3).

Usage: python -m bench deployment-templates [--counts 0 10 100 250] [--then 330]
       [--then-if-under 180] [--out DIR]
Writes DIR/deployment_templates.md (DIR defaults to bench/results/). ``--then`` synthesises that
many tables too if the largest of ``--counts`` took under ``--then-if-under`` seconds (0: never).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench.common.benchlib import RESULTS, ROOT, fmt_s, log, publish, report_header

PYTHON = ROOT / ".venv" / "bin" / "python"
REVISION = "66afb07"
"""The per-table stack: a queue, function and schedule per table, in nested stacks of 30."""
COUNTS = (0, 10, 100, 250)
THEN = 330
"""Past about 345 tables the main template of the per-table stack is over 1,000,000 bytes (999,295
at 345, 1,011,814 at 350): the 330 tables of the default run come near it."""
THEN_IF_UNDER = 180.0
TEMPLATE_LIMIT = 1_000_000
"""Bytes of a template CloudFormation takes from S3 (1 MB)."""
STACK_RESOURCE_LIMIT = 500
MAIN = "Castable.template.json"

CHILD = """\
import json, os, sys, time
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
import aws_cdk as cdk
import app, infra
count, outdir, result = int(sys.argv[1]), sys.argv[2], sys.argv[3]
tables = [{"name": f"t{i:04d}"} for i in range(1, count + 1)]
t0 = time.perf_counter()
cdk_app = cdk.App(
    context={"aws:cdk:bundling-stacks": [], "config": "", "tables": json.dumps(tables)}, outdir=outdir
)
app.build(cdk_app)
cdk_app.synth()
seconds = time.perf_counter() - t0
with open(result, "w") as f:
    json.dump({"seconds": seconds, "infra": infra.__file__, "app": app.__file__}, f)
"""
"""What one synth process runs: ``count`` tables into ``outdir``, its seconds and the files of the
``app`` and ``infra`` it imported into ``result``."""


@contextmanager
def worktree(revision: str = REVISION) -> Iterator[Path]:
    """A detached git worktree of ``revision`` of this repository, removed afterwards."""
    parent = Path(tempfile.mkdtemp(prefix="castable-templates-"))
    tree = parent / "tree"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), revision], check=True, capture_output=True
    )
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
        shutil.rmtree(parent, ignore_errors=True)


def synth(tree: Path, count: int, outdir: Path) -> dict[str, Any]:
    """Synthesise the app of ``tree`` with ``count`` tables into ``outdir``, in a process of its own:
    the seconds of the synth and of the process, and the ``infra`` module's file (in ``tree``)."""
    result = outdir.parent / f"{outdir.name}.json"
    env = {
        **os.environ,
        "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'src'}",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    t0 = time.perf_counter()
    done = subprocess.run(
        [str(PYTHON), "-c", CHILD, str(count), str(outdir), str(result)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    process_s = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"synth of {count} tables failed ({done.returncode}):\n{done.stderr[-4000:]}")
    child = json.loads(result.read_text())
    for module in ("infra", "app"):
        if not Path(child[module]).resolve().is_relative_to(tree.resolve()):
            raise RuntimeError(f"{module} was imported from {child[module]}, not the worktree {tree}")
    return {"synth_s": child["seconds"], "process_s": process_s, "infra_file": child["infra"]}


def measure(outdir: Path) -> dict[str, Any]:
    """The main template's and the nested templates' bytes and resources in a cloud assembly."""
    main = outdir / MAIN
    nested = sorted(outdir.glob("*.nested.template.json"))
    sizes = {p.name: p.stat().st_size for p in [main, *nested]}
    resources = {p.name: len(json.loads(p.read_text()).get("Resources", {})) for p in [main, *nested]}
    template = json.loads(main.read_text())
    stacks = [k for k, v in template["Resources"].items() if v["Type"] == "AWS::CloudFormation::Stack"]
    if len(stacks) != len(nested):
        raise RuntimeError(f"{len(stacks)} nested stacks in {MAIN}, but {len(nested)} nested templates in {outdir}")
    minified = len(json.dumps(template, separators=(",", ":")).encode())
    largest = max(sizes, key=lambda name: sizes[name])
    return {
        "main_bytes": sizes[MAIN],
        "main_bytes_minified": minified,
        "main_resources": resources[MAIN],
        "nested_templates": len(nested),
        "nested_bytes": sum(sizes[p.name] for p in nested),
        "resources": sum(resources.values()),
        "most_resources": max(resources.values()),
        "largest_template": largest,
        "largest_bytes": sizes[largest],
        "main_over_limit": sizes[MAIN] > TEMPLATE_LIMIT,
    }


def per_table_stack(counts: Sequence[int]) -> list[dict[str, Any]]:
    """One row per number of tables in ``counts`` for the per-table stack of :data:`REVISION`:
    ``tables``, ``main_bytes``, ``main_bytes_minified``, ``main_resources``, ``nested_templates``,
    ``nested_bytes``, ``resources`` (all templates), ``most_resources`` (in one template),
    ``largest_template``, ``largest_bytes``, ``main_over_limit`` (over 1,000,000 bytes),
    ``synth_s``, ``process_s``, ``revision`` and ``infra_file``. Synthesises one at a time."""
    rows: list[dict[str, Any]] = []
    with worktree(REVISION) as tree, tempfile.TemporaryDirectory(prefix="castable-cdk-out-") as out:
        for count in counts:
            outdir = Path(out) / f"tables-{count}"
            log(f"{REVISION}: synthesising {count} tables")
            timing = synth(tree, count, outdir)
            if not rows:
                log(f"infra imported from {timing['infra_file']}")
            row = {"stack": "per table", "revision": REVISION, "tables": count, **measure(outdir), **timing}
            log(
                f"{count} tables: main {row['main_bytes']:,} B, {row['nested_templates']} nested "
                f"({row['nested_bytes']:,} B), {row['resources']} resources, synth {fmt_s(row['synth_s'])}"
            )
            rows.append(row)
            shutil.rmtree(outdir, ignore_errors=True)
    return rows


def render(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as a markdown table (one row per stack and number of tables)."""
    lines = [
        "| stack | tables | main template | main, minified | nested templates | nested bytes | resources "
        "| most in one template | largest template | synth | process | main over 1,000,000 B |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['stack']} ({r['revision']}) | {r['tables']} | {r['main_bytes']:,} B "
            f"| {r['main_bytes_minified']:,} B "
            f"| {r['nested_templates']} | {r['nested_bytes']:,} B | {r['resources']:,} | {r['most_resources']} "
            f"| {r['largest_bytes']:,} B | {fmt_s(r['synth_s'])} | {fmt_s(r['process_s'])} "
            f"| {'**yes**' if r['main_over_limit'] else 'no'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=list(COUNTS))
    parser.add_argument("--then", type=int, default=THEN)
    parser.add_argument("--then-if-under", type=float, default=THEN_IF_UNDER)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    t0 = time.perf_counter()
    rows = per_table_stack(args.counts)
    last = max(rows, key=lambda r: r["tables"])
    if args.then and last["process_s"] < args.then_if_under:
        rows += per_table_stack([args.then])
    elif args.then:
        log(f"{args.then} tables skipped: {last['tables']} took {fmt_s(last['process_s'])}")
    total_s = time.perf_counter() - t0
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False).stdout.strip()
    lines = report_header(
        "deployment templates",
        f"aws-cdk-lib {version('aws-cdk-lib')}, cdk-nag {version('cdk-nag')}, node {node}. Whole run {fmt_s(total_s)}.",
    )
    lines += [
        f"The per-table stack of revision {REVISION} (a landing queue, dead letters, ingest function and "
        "maintenance schedule per table, in nested stacks of 30), synthesised offline without bundling, "
        'one synth at a time in its own process, with `-c config= -c tables=\'[{"name": "t0001"}, ...]\'` '
        "(default settings). Bytes as written to the cloud assembly (minified: the same JSON without "
        "whitespace); resources across the main and nested templates (CloudFormation allows 500 in one); "
        "synth: `app.build` + `synth()`, process: the same plus Python, jsii and the CDK library starting. "
        f"CloudFormation takes a template of at most 1 MB from S3 (over {TEMPLATE_LIMIT:,} B: marked).",
        "",
        render(rows),
    ]
    publish("deployment_templates", lines, args.out)


if __name__ == "__main__":
    main()
