"""The CDK app synthesised offline, for tests of the deployment."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

TABLES = [
    {"name": "events", "schedule": "rate(6 hours)"},
    {"name": "orders", "schedule": "cron(0 3 * * ? *)", "ingest_mode": "upsert", "op_column": "op"},
]


def synth(outdir: Path, **context: Any) -> dict[str, Any]:
    """The stack's template for ``context`` (``tables`` defaults to :data:`TABLES`, unless a
    ``config`` file is given)."""
    import aws_cdk as cdk

    import app

    # Bundling pip-installs ~190 MB of Linux wheels; it is measured by bench/bundle_size.py instead.
    defaults = {} if "config" in context else {"tables": TABLES}
    cdk_app = cdk.App(context={"aws:cdk:bundling-stacks": [], **defaults, **context}, outdir=str(outdir))
    app.build(cdk_app)
    cdk_app.synth()
    return dict(json.loads((outdir / "Castable.template.json").read_text()))
