"""Lambda code bundled without Docker: pip installs manylinux wheels for the Lambda runtime.

The bundle holds castable (src/castable), the handlers (lambdas/) and their dependencies
(pyarrow, pyroaring, sqlglot, tenacity, filelock, Powertools, pydantic, and boto3: the X-Ray SDK
pulls in a newer botocore than the runtime's boto3 expects, so both are bundled together).
pyarrow's headers and tests are removed to stay well under Lambda's 250 MB limit.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import jsii
from aws_cdk import BundlingOptions, ILocalBundling
from aws_cdk import aws_lambda as lambda_

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = lambda_.Runtime.PYTHON_3_12
REQUIREMENTS = [
    "boto3>=1.35",
    "pyarrow>=17",
    "pyroaring>=1.0",
    "sqlglot>=25",
    "tenacity>=8.2",
    "filelock>=3.12",
    "aws-lambda-powertools[tracer]>=3",
    "pydantic>=2",
]
_PRUNE = ["pyarrow/include", "pyarrow/tests", "pyarrow/src"]


def install(target: Path) -> None:
    """Fill ``target`` with the function code and its Linux x86_64 / CPython 3.12 wheels."""
    # Every manylinux tag Amazon Linux 2023 accepts: with manylinux2014 alone pip falls back to an
    # old pyarrow, with manylinux_2_28 alone it finds no pydantic-core.
    platforms = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]
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
            "3.12",
            "--implementation",
            "cp",
            "--only-binary=:all:",
            "--target",
            str(target),
            *REQUIREMENTS,
        ],
        check=True,
    )
    for rel in _PRUNE:
        shutil.rmtree(target / rel, ignore_errors=True)
    shutil.copytree(
        ROOT / "src" / "castable", target / "castable", dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(
        ROOT / "lambdas", target / "lambdas", dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
    )


@jsii.implements(ILocalBundling)
class LocalBundler:
    """CDK local bundling: runs pip on this machine instead of in the bundling image."""

    def try_bundle(self, output_dir: str, *, image: object = None, **_: object) -> bool:
        install(Path(output_dir))
        return True


def function_code() -> lambda_.Code:
    """The one asset every castable function shares (its hash covers src/ and lambdas/)."""
    return lambda_.Code.from_asset(
        str(ROOT),
        exclude=["*", "!src", "!src/castable", "!src/castable/**", "!lambdas", "!lambdas/**", "**/__pycache__"],
        bundling=BundlingOptions(image=RUNTIME.bundling_image, local=LocalBundler(), command=["false"]),
    )
