"""Every bad input gets a clear, catchable error and leaves the table exactly as it was.

The tests here need a server, a JVM, a side venv or minutes; the rest are the unit tier's
(tests/unit/table/test_bad_inputs.py)."""

from __future__ import annotations

import pytest

import castable


def test_missing_credentials_are_a_store_unavailable_error(
    s3_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(castable.StoreUnavailableError, match="credentials") as info:
        castable.open_table("s3://bucket/table", storage_options={"endpoint_url": s3_endpoint, "region": "us-east-1"})
    assert type(info.value.__cause__).__name__ == "NoCredentialsError"
