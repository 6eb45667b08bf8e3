"""Authentication and authorization of a served catalog: bearer tokens (a principal's secret or
a token the catalog signed), OAuth2 client credentials as pyiceberg sends them, read and write
access, namespaces, and the CLI that refuses to expose a catalog without them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import jwt
import pyarrow as pa
import pytest
from helpers.rest_catalog import Served
from pyiceberg.exceptions import ForbiddenError, OAuthError, UnauthorizedError

from castable.catalog import Access, Principal
from castable.errors import InvalidInputError

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
WRITER = "w" * 24
READER = "r" * 24
SALES = "s" * 24
ACCESS = f"""
[principals.etl]
secret = "{WRITER}"
access = "write"

[principals.analyst]
secret = "{READER}"

[principals.sales]
secret = "{SALES}"
access = "write"
namespaces = ["sales"]
"""


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[Served]:
    (tmp_path / "access.toml").write_text(ACCESS)
    (tmp_path / "wh").mkdir()
    served = Served(str(tmp_path / "wh"), access=Access.from_file(tmp_path / "access.toml"))
    admin = served.client(token=WRITER)
    admin.create_namespace("sales")
    admin.create_namespace("ops")
    admin.create_table("ops.t", schema=ROWS.schema).append(ROWS)
    yield served
    served.close()


def test_without_a_token_every_route_is_401_with_the_error_model(guarded: Served) -> None:
    for method, path in [
        ("GET", "/v1/config"),
        ("GET", "/v1/namespaces"),
        ("GET", "/v1/namespaces/ops/tables/t"),
        ("DELETE", "/v1/namespaces/ops/tables/t?purgeRequested=true"),
        ("POST", "/v1/namespaces"),
    ]:
        body = {"namespace": ["x"]} if method == "POST" else None
        code, answer = guarded.raw(method, path, body)
        assert code == 401 and answer["error"]["type"] == "NotAuthorizedException", (method, path, answer)
        code, _ = guarded.raw(method, path, body, headers={"Authorization": "Bearer not-a-token-it-knows"})
        assert code == 401
    with pytest.raises(UnauthorizedError):
        guarded.client().list_namespaces()
    assert guarded.castable("ops", "t").count() == 3 and guarded.client(token=WRITER).list_namespaces() == [
        ("ops",),
        ("sales",),
    ]


def test_a_read_token_reads_and_a_commit_with_it_is_403(guarded: Served) -> None:
    reader = guarded.client(token=READER)
    table = reader.load_table("ops.t")
    assert table.scan().to_arrow().num_rows == 3
    with pytest.raises(ForbiddenError, match="may read this catalog, not change it"):
        table.append(ROWS)
    with pytest.raises(ForbiddenError):
        reader.create_namespace("mine")
    with pytest.raises(ForbiddenError):
        reader.purge_table("ops.t")
    assert guarded.castable("ops", "t").version == 1
    guarded.client(token=WRITER).load_table("ops.t").append(ROWS)
    assert guarded.castable("ops", "t").count() == 6


def test_client_credentials_as_pyiceberg_sends_them(guarded: Served) -> None:
    """``credential=name:secret``: pyiceberg posts the client credentials grant to
    /v1/oauth/tokens, then sends the signed token it got on every request."""
    writer = guarded.client(credential=f"etl:{WRITER}")
    writer.load_table("ops.t").append(ROWS)
    assert guarded.castable("ops", "t").count() == 6
    with pytest.raises(OAuthError, match="invalid_client"):
        guarded.client(credential=f"etl:{READER}")
    with pytest.raises(OAuthError, match="invalid_client"):
        guarded.client(credential=f"nobody:{WRITER}")
    reader = guarded.client(credential=f"analyst:{READER}")
    with pytest.raises(ForbiddenError):
        reader.load_table("ops.t").append(ROWS)


def test_tokens_are_signed_short_lived_and_can_be_exchanged(guarded: Served) -> None:
    def post(form: dict[str, str]) -> tuple[int, dict[str, str]]:
        import urllib.error
        import urllib.request

        data = urllib.parse.urlencode(form).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        try:
            with urllib.request.urlopen(urllib.request.Request(f"{guarded.uri}/v1/oauth/tokens", data, headers)) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    code, issued = post(
        {"grant_type": "client_credentials", "client_id": "etl", "client_secret": WRITER, "scope": "catalog"}
    )
    assert code == 200 and issued["token_type"] == "bearer" and 0 < int(issued["expires_in"]) <= 3600
    token = issued["access_token"]
    assert WRITER not in token and jwt.decode(token, options={"verify_signature": False})["sub"] == "etl"
    assert guarded.raw("GET", "/v1/namespaces", headers={"Authorization": f"Bearer {token}"})[0] == 200
    forged = jwt.encode(
        {"sub": "etl", "iss": "castable-catalog", "exp": int(time.time()) + 60},
        "a-guessed-key-of-thirty-two-bytes!",
        "HS256",
    )
    assert guarded.raw("GET", "/v1/namespaces", headers={"Authorization": f"Bearer {forged}"})[0] == 401
    code, exchanged = post({"grant_type": "urn:ietf:params:oauth:grant-type:token-exchange", "subject_token": token})
    assert code == 200 and exchanged["access_token"]
    assert post({"grant_type": "password", "username": "etl", "password": WRITER}) == (
        400,
        {
            "error": "unsupported_grant_type",
            "error_description": "grant_type 'password': this catalog issues tokens for client_credentials",
        },
    )


def test_an_expired_token_is_401() -> None:
    access = Access({"etl": (WRITER, Principal("etl", writes=True))}, lifetime=-1)
    token = access.issue({"grant_type": "client_credentials", "client_id": "etl", "client_secret": WRITER})[
        "access_token"
    ]
    with pytest.raises(Exception, match="expired"):
        access.authenticate(f"Bearer {token}")
    assert access.authenticate(f"Bearer {WRITER}").name == "etl"


def test_a_principal_limited_to_namespaces_sees_and_changes_only_those(guarded: Served) -> None:
    sales = guarded.client(token=SALES)
    assert sales.list_namespaces() == [("sales",)]
    sales.create_table("sales.orders", schema=ROWS.schema).append(ROWS)
    sales.create_namespace("sales.eu")
    with pytest.raises(ForbiddenError, match="may not use namespace ops"):
        sales.load_table("ops.t")
    with pytest.raises(ForbiddenError):
        sales.create_namespace("salesforce")
    with pytest.raises(ForbiddenError):
        sales.purge_table("ops.t")
    assert guarded.castable("ops", "t").count() == 3 and guarded.castable("sales", "orders").count() == 3


def test_an_access_file_that_is_wrong_is_refused_clearly(tmp_path: Path) -> None:
    cases = {
        'principals.a.secret = "short"': "shorter than 16",
        f'principals.a.secret = "{WRITER}"\nprincipals.a.access = "admin"': "access is read or write",
        f'principals.a.secret = "{WRITER}"\nprincipals.a.namespaces = "sales"': "namespaces is a list",
        "principals = {}": "at least one principal",
        "principals.a = [": "cannot read the access file",
    }
    for text, message in cases.items():
        (tmp_path / "a.toml").write_text(text)
        with pytest.raises(InvalidInputError, match=message):
            Access.from_file(tmp_path / "a.toml")


def castable_serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = str(Path(sys.executable).with_name("castable"))
    return subprocess.run(
        [command, "catalog", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_serving_other_machines_without_authentication_is_refused(tmp_path: Path) -> None:
    refused = castable_serve(str(tmp_path), "--host", "0.0.0.0", "--port", "0")
    assert refused.returncode != 0 and "--access" in refused.stderr and "--insecure" in refused.stderr, refused.stderr


def serving(*args: str) -> subprocess.Popen[str]:
    command = str(Path(sys.executable).with_name("castable"))
    env = {**os.environ, "COLUMNS": "400"}
    return subprocess.Popen(
        [command, "catalog", "serve", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def test_a_secret_on_the_command_line_is_warned_of() -> None:
    proc = serving(
        "s3://bucket/wh", "--port", "0", "-o", "aws_secret_access_key=abc", "-o", "endpoint_url=http://127.0.0.1:1"
    )
    try:
        assert proc.stdout is not None
        warning = proc.stdout.readline()
        assert "aws_secret_access_key on the command line is visible to every user" in warning, warning
        assert "AWS_PROFILE" in warning
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_a_served_catalog_logs_no_token(tmp_path: Path) -> None:
    (tmp_path / "access.toml").write_text(ACCESS)
    (tmp_path / "access.toml").chmod(0o600)
    (tmp_path / "wh").mkdir()
    proc = serving(str(tmp_path / "wh"), "--port", "0", "--access", str(tmp_path / "access.toml"))
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        uri = line.strip().rsplit(" ", 1)[-1]
        assert "(tokens required)" in line, line
        from pyiceberg.catalog.rest import RestCatalog

        tokens = {"oauth2-server-uri": f"{uri}/v1/oauth/tokens"}
        RestCatalog("c", uri=uri, credential=f"etl:{WRITER}", **tokens).create_namespace("db")
        RestCatalog("c", uri=uri, token=WRITER, **tokens).list_namespaces()
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "POST /v1/oauth/tokens" in err and "GET /v1/namespaces" in err, err
    assert WRITER not in err and "Bearer" not in err


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made here (as an operator's own CA would)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "castable catalog")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(key, hashes.SHA256())
    )
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return folder / "cert.pem", folder / "key.pem"


def test_the_catalog_serves_https_with_a_certificate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--ssl-certfile and --ssl-keyfile: pyiceberg, trusting the certificate (its ``ssl.cabundle``),
    reaches the catalog over HTTPS; plain HTTP on the same port gets no catalog answer. (requests
    lets REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE, set on this machine, win over a session's own
    bundle, so the test clears them as a user's shell would not have them.)"""
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    import urllib.error
    import urllib.request

    from pyiceberg.catalog.rest import RestCatalog

    cert, key = self_signed(tmp_path)
    (tmp_path / "wh").mkdir()
    proc = serving(
        str(tmp_path / "wh"), "--port", "0", "--ssl-certfile", str(cert), "--ssl-keyfile", str(key), "--quiet"
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        uri = line.strip().rsplit(" ", 1)[-1]
        assert uri.startswith("https://127.0.0.1:"), line
        client = RestCatalog("c", uri=uri, ssl={"cabundle": str(cert)})  # type: ignore[arg-type]
        client.create_namespace("db")
        assert client.list_namespaces() == [("db",)]
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            urllib.request.urlopen(uri.replace("https://", "http://") + "/v1/config", timeout=5)
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
