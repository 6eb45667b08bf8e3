"""The CDK app synthesised offline, for tests of the deployment."""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path
from typing import Any

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


def synth(outdir: Path, **context: Any) -> dict[str, Any]:
    """The stack's template for ``context`` (flags alone, unless a ``config`` file is given)."""
    import aws_cdk as cdk

    import app

    # Bundling pip-installs ~190 MB of Linux wheels; it is measured by bench/deployment/bundle_size.py instead.
    defaults = {} if "config" in context else {"config": ""}
    cdk_app = cdk.App(context={"aws:cdk:bundling-stacks": [], **defaults, **context}, outdir=str(outdir))
    app.build(cdk_app)
    cdk_app.synth()
    return flattened(outdir, "Castable.template.json")


def flattened(outdir: Path, name: str) -> dict[str, Any]:
    """The stack's template with its nested stacks' resources merged in, as if one stack: each
    nested ``Ref`` of a parameter becomes what the parent passes, each parent ``Fn::GetAtt`` of a
    nested output becomes that output's value, so tests read one set of resources and intrinsics."""
    template = json.loads((outdir / name).read_text())
    resources = template["Resources"]
    outputs: dict[tuple[str, str], Any] = {}
    assets = json.loads((outdir / "Castable.assets.json").read_text())["files"]
    for logical_id, nested in [(k, v) for k, v in resources.items() if v["Type"] == "AWS::CloudFormation::Stack"]:
        url = nested["Properties"]["TemplateURL"]["Fn::Join"][1][-1]  # ".../<asset hash>.json"
        child = flattened(outdir, assets[url.rpartition("/")[2].removesuffix(".json")]["source"]["path"])
        child = _substitute(child, partial(_passed, nested["Properties"].get("Parameters", {})))
        for out, value in child.get("Outputs", {}).items():
            outputs[(logical_id, f"Outputs.{out}")] = value["Value"]
        clash = set(child["Resources"]) & set(resources)
        assert not clash, f"logical ids in both stacks: {sorted(clash)[:5]}"
        resources.update(child["Resources"])
        del resources[logical_id]

    def output(v: dict[str, Any]) -> Any:
        if set(v) == {"Fn::GetAtt"} and isinstance(v["Fn::GetAtt"], list):
            return outputs.get(tuple(v["Fn::GetAtt"]))  # type: ignore[call-overload]
        return None

    return dict(_substitute(template, output))


def _passed(parameters: dict[str, Any], v: dict[str, Any]) -> Any:
    """What the parent passes for a ``Ref`` of one of the nested stack's parameters."""
    return parameters.get(v["Ref"]) if set(v) == {"Ref"} else None


def _substitute(value: Any, replace: Any) -> Any:
    """``value`` with every dict that ``replace`` maps to something else replaced by it."""
    if isinstance(value, dict):
        new = replace(value) if len(value) == 1 else None
        if new is not None:
            return new
        return {k: _substitute(v, replace) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, replace) for v in value]
    return value
