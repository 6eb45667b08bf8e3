"""The deployment's configuration: tables, databases, schedules and options, from a JSON file
committed beside cdk.json (``castable.json``) or from ``-c`` context flags, checked with errors
that name the key at fault.

A file is the safer source: every deploy reads the same tables, where a deploy run without the
``-c tables=...`` flag of the one before would remove the other tables' queues and functions.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from infra.stack import CastableConfig, DatabaseConfig, TableConfig

C = TypeVar("C")

CONTEXT_KEYS = {"tables": "tables", "databases": "databases", "versioned": "versioned", "emrImage": "emr_image"}
CONTEXT_KEYS |= {"alertEmail": "alert_email", "architecture": "architecture", "kmsKeyArn": "kms_key_arn"}
CONTEXT_KEYS |= {
    "bucketName": "bucket_name",
    "functionPackage": "function_package",
    "emrEnvironment": "emr_environment",
    "glueDatabase": "glue_database",
    "icebergCatalog": "iceberg_catalog",
}
"""The ``-c`` context flags and the settings they give."""


class ConfigError(ValueError):
    """The deployment's configuration is malformed; the message names the key at fault."""


def _build(cls: type[C], doc: object, where: str) -> C:
    """A ``cls`` dataclass from a JSON object, refusing unknown keys and values of the wrong type."""
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{where} must be an object, not {type(doc).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(doc) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(fields))})")
    required = [
        n for n, f in fields.items() if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [n for n in required if n not in doc]
    if missing:
        raise ConfigError(f"{where}: {missing[0]!r} is required")
    values: dict[str, Any] = {}
    for key, value in doc.items():
        if key == "tables":
            values[key] = _list(TableConfig, value, f"{where}.tables")
        elif key == "databases":
            values[key] = _list(DatabaseConfig, value, f"{where}.databases")
        else:
            values[key] = _scalar(value, fields[key], f"{where}.{key}")
    try:
        return cls(**values)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where}: {e}") from None


def _list(cls: type[C], value: object, where: str) -> list[C]:
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list, not {type(value).__name__}")
    built = [_build(cls, item, f"{where}[{i}]") for i, item in enumerate(value)]
    names = [getattr(b, "name", None) for b in built]
    repeated = sorted({n for n in names if names.count(n) > 1 and n is not None})
    if repeated:
        raise ConfigError(f"{where}: {repeated[0]!r} is named more than once")
    return built


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
    doc: dict[str, object] = {"tables": [{"name": "events"}]}
    for flag, key in CONTEXT_KEYS.items():
        value = context.get(flag)
        if value is None:
            continue
        if key in ("tables", "databases") and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as e:
                raise ConfigError(f"-c {flag} is not JSON: {e}") from None
        if key in ("versioned", "iceberg_catalog"):
            value = value in (True, "true", "True", "1")
        doc[key] = value
    return _build(CastableConfig, doc, "context")
