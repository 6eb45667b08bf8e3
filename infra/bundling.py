"""The CDK side of the Lambda bundle: an asset bundled locally, without Docker, by
infra/bundle.py (what the bundle holds and how it is installed), or a container image built
from infra/lambda.Dockerfile, which runs the same install.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Literal

import jsii
from aws_cdk import AssetHashType, BundlingOptions, ILocalBundling
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_lambda as lambda_

from infra.bundle import CONSTRAINTS, ROOT, Architecture, install

RUNTIME = lambda_.Runtime.PYTHON_3_12
PackageKind = Literal["zip", "image"]
DOCKERFILE = "infra/lambda.Dockerfile"
"""The container image of the functions (``"function_package": "image"``), built from the repository."""


@jsii.implements(ILocalBundling)
class LocalBundler:
    """CDK local bundling: runs pip on this machine instead of in the bundling image."""

    def __init__(self, architecture: Architecture) -> None:
        self.architecture = architecture

    def try_bundle(self, output_dir: str, *, image: object = None, **_: object) -> bool:
        install(Path(output_dir), self.architecture)
        return True


def _sources() -> list[Path]:
    """The files the bundle is made from, beside the wheels the constraints pin."""
    files = [ROOT / "pyproject.toml", CONSTRAINTS]
    for folder in (ROOT / "src" / "castable", ROOT / "lambdas"):
        files += sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return files


@functools.cache
def source_hash(architecture: Architecture) -> str:
    """The bundle's identity: its sources, its pins and the architecture its wheels are for, so a
    changed pin or architecture deploys a new bundle. Read once per process: the main stack and
    every ingest stack take it for their assets."""
    digest = hashlib.sha256(architecture.encode())
    for path in _sources():
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _zip_code(architecture: Architecture) -> lambda_.Code:
    """The zip asset every castable function of a stack shares."""
    return lambda_.Code.from_asset(
        str(ROOT),
        exclude=[
            "*",
            "!pyproject.toml",
            "!infra",
            "!infra/bundle-constraints.txt",
            "!src",
            "!src/castable",
            "!src/castable/**",
            "!lambdas",
            "!lambdas/**",
            "**/__pycache__",
        ],
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=source_hash(architecture),
        bundling=BundlingOptions(image=RUNTIME.bundling_image, local=LocalBundler(architecture), command=["false"]),
    )


class Package:
    """How a stack's functions get their code: one zip asset they share (bundled here, no
    Docker), or the container image of infra/lambda.Dockerfile with each handler as its command
    (built with Docker on deploy; the choice when the zip nears Lambda's 250 MiB)."""

    def __init__(self, architecture: Architecture, kind: PackageKind) -> None:
        self.architecture = architecture
        self.kind = kind
        self._zip = _zip_code(architecture) if kind == "zip" else None

    def code(self, handler: str) -> lambda_.Code:
        """The code of the function running ``handler`` (``lambdas.<name>.handler``)."""
        if self._zip is not None:
            return self._zip
        return lambda_.Code.from_asset_image(
            str(ROOT),
            file=DOCKERFILE,
            build_args={"ARCHITECTURE": self.architecture},
            platform=ecr_assets.Platform.LINUX_ARM64
            if self.architecture == "arm64"
            else ecr_assets.Platform.LINUX_AMD64,
            cmd=[handler],
        )

    def handler(self, handler: str) -> str:
        return handler if self._zip is not None else lambda_.Handler.FROM_IMAGE

    @property
    def runtime(self) -> lambda_.Runtime:
        return RUNTIME if self._zip is not None else lambda_.Runtime.FROM_IMAGE

    @property
    def lambda_architecture(self) -> lambda_.Architecture:
        return lambda_.Architecture.ARM_64 if self.architecture == "arm64" else lambda_.Architecture.X86_64
