"""The Lambda bundle's contents, installed without Docker and without the CDK: pip installs
manylinux wheels for the Lambda runtime into a folder, then castable and the handlers beside them.

The bundle holds castable (src/castable), the handlers (lambdas/) and their dependencies:
castable's own and its ``lambda`` extra, read from pyproject.toml so the bundle can never miss
a dependency the package declares, at the versions infra/bundle-constraints.txt pins (boto3 is
among them: the X-Ray SDK pulls in a newer botocore than the runtime's boto3 expects, so both
are bundled together). To stay under Lambda's 250 MiB limit with numpy, the parts of pyarrow
castable never loads are removed: headers, tests, Flight, the filesystems no one imports (S3 is
kept: pyiceberg imports it) and the copies pip makes of symlinked shared libraries; pyiceberg's
Hive client, zstandard's second backend (its C one is loaded), and botocore's models of the
services no function calls (``BOTOCORE_SERVICES`` lists those kept) go too.

The zip bundle (infra/bundling.py) and the container image (infra/lambda.Dockerfile, which runs
``python infra/bundle.py /var/task``) are both made by :func:`install`, so they hold the same
files. tests/integration/aws/test_bundle.py invokes every handler from the bundle alone under python3.12.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parent.parent
Architecture = Literal["x86_64", "arm64"]
MACHINES: dict[str, str] = {"x86_64": "x86_64", "arm64": "aarch64"}
"""Each Lambda architecture and the machine its manylinux wheels name."""
CONSTRAINTS = ROOT / "infra" / "bundle-constraints.txt"
"""The exact version of every package the bundle ships, so what deploys is what was tested."""
_PRUNE = [
    "pyarrow/include",
    "pyarrow/tests",
    "pyarrow/src",
    "pyarrow/libarrow_flight.so.*",
    "pyarrow/libarrow_python_flight.so*",
    "pyarrow/_flight.*.so",
    "pyarrow/flight.py",
    "pyarrow/_gcsfs.*.so",
    "pyarrow/_azurefs.*.so",
    "pyarrow/_hdfs.*.so",
    "pyarrow/_pyarrow_cpp_tests.*.so",
    "pyarrow/libarrow_python.so",
    "pyarrow/libarrow_python.so.*.*.*",
    "pyarrow/libarrow_python_parquet_encryption.so",
    "pyarrow/libarrow_python_parquet_encryption.so.*.*.*",
    "hive_metastore",
    "zstandard/_cffi.*.so",
    "zstandard/backend_cffi.py",
]
"""Globs under the bundle removed after pip: each is loaded by nothing castable imports."""
BOTOCORE_SERVICES = frozenset({"s3", "glue", "lambda", "sqs", "stepfunctions", "sts", "xray"})
"""The AWS services whose botocore models the bundle keeps: every client castable and the
functions make (tests/integration/aws/test_bundle.py checks the code names no other), X-Ray's (its SDK samples
traces through one) and STS for credentials."""


MIN_PIP = (24, 2)
"""The first pip whose Requires-Python check takes ``--python-version`` into account
(pypa/pip#12216): older ones, such as the 23.2 that Python 3.11 ships, refuse wheels for 3.12
when Python 3.11 runs them (``Package 'numpy' requires a different Python``)."""


class BundleBuildError(RuntimeError):
    """The machine cannot build the bundle as it is; the message says what to change."""


def check_pip(python_version: str) -> None:
    """Refuse to install wheels for ``python_version`` with a pip that checks them against the
    interpreter running it instead, saying how to get one that does not."""
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    upgrade = f"{sys.executable} -m pip install --upgrade 'pip>={MIN_PIP[0]}.{MIN_PIP[1]}'"
    try:
        found = version("pip")
    except PackageNotFoundError:
        raise BundleBuildError(f"{sys.executable} has no pip, which the bundle is built with: {upgrade}") from None
    if python_version != running and tuple(int(n) for n in re.findall(r"\d+", found)[:2]) < MIN_PIP:
        raise BundleBuildError(
            f"pip {found} cannot install the wheels of Python {python_version} from Python {running}: its "
            f"Requires-Python check ignores --python-version (pypa/pip#12216; fixed in pip "
            f"{MIN_PIP[0]}.{MIN_PIP[1]}): {upgrade}"
        )


def requirements(extra: str = "lambda") -> list[str]:
    """castable's dependencies plus one of its extras, as pyproject.toml declares them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [*project["dependencies"], *project["optional-dependencies"][extra]]


def install_wheels(
    target: Path, packages: list[str], python_version: str, architecture: Architecture, constraints: Path = CONSTRAINTS
) -> None:
    """pip-install ``packages`` into ``target`` as Linux / CPython ``python_version`` wheels for
    ``architecture`` at the versions ``constraints`` pins, whatever machine runs this."""
    check_pip(python_version)
    # Every manylinux tag Amazon Linux 2023 accepts: with manylinux2014 alone pip falls back to an
    # old pyarrow, with manylinux_2_28 alone it finds no pydantic-core.
    machine = MACHINES[architecture]
    platforms = [f"manylinux_2_28_{machine}", f"manylinux_2_17_{machine}", f"manylinux2014_{machine}"]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-compile",
            *(arg for p in platforms for arg in ("--platform", p)),
            "--python-version",
            python_version,
            "--implementation",
            "cp",
            "--only-binary=:all:",
            "--target",
            str(target),
            "--constraint",
            str(constraints),
            *packages,
        ],
        check=True,
    )


def install(target: Path, architecture: Architecture = "x86_64") -> None:
    """Fill ``target`` with the function code and its Linux / CPython 3.12 wheels for ``architecture``."""
    install_wheels(target, requirements(), "3.12", architecture)
    for pattern in _PRUNE:
        for path in target.glob(pattern):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
    for model in (target / "botocore" / "data").iterdir():
        if model.is_dir() and model.name not in BOTOCORE_SERVICES:
            shutil.rmtree(model)
    shutil.copytree(
        ROOT / "src" / "castable", target / "castable", dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(
        ROOT / "lambdas", target / "lambdas", dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
    )


if __name__ == "__main__":
    install(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "x86_64")  # type: ignore[arg-type]
