"""The deployment's configuration: deployment-wide options only, from a JSON file committed
beside cdk.json (``castable.json``) or from ``-c`` context flags, checked with errors that name
the key at fault. Tables are not configured here: they are data in the bucket, and each says
how it is served in its own properties (``ingest.*``, ``maintenance.schedule``, ``history.*``).
A file of the per-table deployment (``tables``, ``databases``) is refused with the command that
moves those settings into the tables (infra/migrate.py).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from infra.stack import CastableConfig

C = TypeVar("C")

CONTEXT_KEYS = {"versioned": "versioned", "emrImage": "emr_image"}
CONTEXT_KEYS |= {"alertEmail": "alert_email", "architecture": "architecture", "kmsKeyArn": "kms_key_arn"}
CONTEXT_KEYS |= {
    "bucketName": "bucket_name",
    "functionPackage": "function_package",
    "emrEnvironment": "emr_environment",
    "glueDatabase": "glue_database",
    "icebergCatalog": "iceberg_catalog",
    "ingestConcurrency": "ingest_concurrency",
    "maintenanceEveryMinutes": "maintenance_every_minutes",
}
"""The ``-c`` context flags and the settings they give."""


class ConfigError(ValueError):
    """The deployment's configuration is malformed; the message names the key at fault."""


def _build(cls: type[C], doc: object, where: str) -> C:
    """A ``cls`` dataclass from a JSON object, refusing unknown keys and values of the wrong type."""
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{where} must be an object, not {type(doc).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    listed = sorted(set(doc) & {"tables", "databases"})
    if listed:
        raise ConfigError(
            f"{where}.{listed[0]}: tables are data, not configuration, since the deployment serves every table "
            f"in its bucket: move their settings into the tables with `python -m infra.migrate {where} "
            "<bucket>` (it sets each listed table's properties and rewrites the file without them)"
        )
    unknown = sorted(set(doc) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(fields))})")
    required = [
        n for n, f in fields.items() if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [n for n in required if n not in doc]
    if missing:
        raise ConfigError(f"{where}: {missing[0]!r} is required")
    values = {key: _scalar(value, fields[key], f"{where}.{key}") for key, value in doc.items()}
    try:
        return cls(**values)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where}: {e}") from None


_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "bool": (bool,),
    "float | None": (int, float, type(None)),
    "int | None": (int, type(None)),
    "str | None": (str, type(None)),
}


def _scalar(value: object, field: dataclasses.Field[Any], where: str) -> object:
    """``value`` if it has the field's type (as written in its annotation), else a ConfigError."""
    kind = str(field.type)
    allowed = _TYPES.get(kind)
    if kind.startswith("Literal["):
        choices = [c.strip().strip("'\"") for c in kind[len("Literal[") : -1].split(",")]
        if value not in choices:
            raise ConfigError(f"{where} must be one of {', '.join(choices)}, not {value!r}")
        return value
    if allowed is not None:
        wrong_bool = isinstance(value, bool) and bool not in allowed
        if not isinstance(value, allowed) or wrong_bool:
            raise ConfigError(f"{where} must be {kind.replace(' | None', ' or null')}, not {json.dumps(value)}")
    return value


def load(path: Path) -> CastableConfig:
    """The configuration in the JSON file at ``path``."""
    try:
        doc = json.loads(path.read_text())
    except OSError as e:
        raise ConfigError(f"cannot read the configuration file {path}: {e}") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path} is not JSON: {e}") from None
    return _build(CastableConfig, doc, path.name)


def choose(context: Mapping[str, object]) -> CastableConfig:
    """The configuration: from the file that context ``config`` names (cdk.json names
    ``castable.json``), or, with ``-c config=`` empty, from the other flags; not both."""
    stale = [flag for flag in ("tables", "databases") if context.get(flag) is not None]
    if stale:
        raise ConfigError(
            f"-c {stale[0]}: tables are data, not configuration, since the deployment serves every table in its "
            "bucket: set each table's properties instead (ingest.mode, maintenance.schedule, ...)"
        )
    path = context.get("config")
    if not path:
        return from_context(context)
    given = [flag for flag in CONTEXT_KEYS if context.get(flag) is not None]
    if given:
        raise ConfigError(
            f"-c {given[0]} and the configuration file {path} both configure the deployment: change the file "
            "(or pass -c config= to configure with flags alone)"
        )
    return load(Path(str(path)))


def from_context(context: Mapping[str, object]) -> CastableConfig:
    """The configuration given as ``-c`` flags (JSON text for ``tables`` and ``databases``)."""
    doc: dict[str, object] = {}
    for flag, key in CONTEXT_KEYS.items():
        value = context.get(flag)
        if value is None:
            continue
        if key in ("versioned", "iceberg_catalog"):
            value = value in (True, "true", "True", "1")
        elif key in ("ingest_concurrency", "maintenance_every_minutes") and isinstance(value, str):
            try:
                value = int(value)
            except ValueError:
                raise ConfigError(f"-c {flag} must be a whole number, not {value!r}") from None
        doc[key] = value
    return _build(CastableConfig, doc, "context")
