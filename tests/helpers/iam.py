"""IAM as AWS enforces it, for tests against the moto server.

moto allows every call unless its own basic IAM is switched on (which cannot evaluate
``s3:prefix`` or ``s3:if-none-match`` conditions), and it answers 404 for a missing key whoever
asks. :class:`IamFront` stands between clients and the moto server: it maps each request's
access key to a role of the synthesised template, asks a maintained IAM simulator
(``@cloud-copilot/iam-simulate``, run by node) whether the role's policies and the bucket policy
allow every IAM action the request needs, and answers S3's ``403 AccessDenied`` if not. A GET or
HEAD of a missing key is answered 404 only if the role may list that key (``s3:ListBucket``
with ``s3:prefix`` the key), else 403, as S3 does. Every refusal is recorded for the test.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import subprocess
import threading
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from helpers import ROOT

ACCOUNT = "123456789012"
REGION = "us-east-1"
SIMULATOR = ROOT / ".tools" / "node_modules" / "@cloud-copilot" / "iam-simulate" / "dist" / "esm" / "index.js"
S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"


# ------------------------------------------------------------------------------- the template


class Template:
    """A synthesised CloudFormation template with its intrinsics resolved for one test account:
    the table bucket is ``bucket``; ``refs`` names other resources (logical id -> ARN or name)."""

    def __init__(self, template: dict[str, Any], bucket: str, refs: dict[str, str] | None = None) -> None:
        self.resources: dict[str, dict[str, Any]] = template["Resources"]
        self.bucket = bucket
        self.bucket_id = next(
            k for k, v in self.resources.items() if v["Type"] == "AWS::S3::Bucket" and k.startswith("Tables")
        )
        self.refs = refs or {}

    def resolve(self, value: Any) -> Any:
        """``value`` with ``Ref``, ``Fn::GetAtt`` and ``Fn::Join`` replaced by strings."""
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((op, arg),) = value.items()
            if op == "Ref":
                return self._ref(arg)
            if op == "Fn::GetAtt":
                return self.arn(arg[0])
            if op == "Fn::Join":
                return str(arg[0]).join(str(self.resolve(v)) for v in arg[1])
        return {k: self.resolve(v) for k, v in value.items()}

    def _ref(self, name: str) -> str:
        pseudo = {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::URLSuffix": ""}
        if name in pseudo:
            return pseudo[name]
        return self.bucket if name == self.bucket_id else self.arn(name)

    def arn(self, name: str) -> str:
        """The ARN of the resource ``name`` (a logical id) in the test account."""
        if name == self.bucket_id:
            return f"arn:aws:s3:::{self.bucket}"
        kinds = {
            "AWS::Lambda::Function": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}",
            "AWS::SQS::Queue": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}",
            "AWS::IAM::Role": f"arn:aws:iam::{ACCOUNT}:role/{name}",
        }
        default = kinds.get(
            self.resources.get(name, {}).get("Type", ""), f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:{name}"
        )
        return self.refs.get(name, default)

    def function(self, prefix: str) -> str:
        """The logical id of the one Lambda function whose id starts with ``prefix``."""
        (found,) = [
            k for k, v in self.resources.items() if v["Type"] == "AWS::Lambda::Function" and k.startswith(prefix)
        ]
        return found

    def environment(self, function: str) -> dict[str, str]:
        """The function's environment variables as deployed."""
        variables = self.resources[function]["Properties"].get("Environment", {}).get("Variables", {})
        return {k: str(self.resolve(v)) for k, v in variables.items()}

    def role_of(self, function: str) -> str:
        """The logical id of the function's execution role."""
        return str(self.resources[function]["Properties"]["Role"]["Fn::GetAtt"][0])

    def role_policies(self, role: str) -> dict[str, Any]:
        """Every identity policy document attached to ``role`` (inline and ``AWS::IAM::Policy``)."""
        policies = {
            f"{role}-{p['PolicyName']}": self.resolve(p["PolicyDocument"])
            for p in self.resources[role]["Properties"].get("Policies", [])
        }
        for key, resource in self.resources.items():
            if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role} in resource["Properties"].get("Roles", []):
                policies[key] = self.resolve(resource["Properties"]["PolicyDocument"])
        return policies

    def bucket_policy(self) -> dict[str, Any]:
        """The table bucket's resource policy."""
        (policy,) = [
            v["Properties"]["PolicyDocument"]
            for v in self.resources.values()
            if v["Type"] == "AWS::S3::BucketPolicy" and v["Properties"]["Bucket"] == {"Ref": self.bucket_id}
        ]
        return dict(self.resolve(policy))


# ------------------------------------------------------------------------------- the simulator


class Simulator:
    """One node process running the IAM simulator; answers are cached per request."""

    def __init__(self) -> None:
        if not SIMULATOR.exists():
            raise RuntimeError(f"the IAM simulator is not installed at {SIMULATOR}: run `make test`")
        self._proc = subprocess.Popen(
            ["node", str(ROOT / "tests" / "helpers" / "iam_simulate.mjs"), SIMULATOR.as_uri()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._lock = threading.Lock()
        self._cache: dict[str, bool] = {}

    def allowed(self, query: dict[str, Any]) -> bool:
        line = json.dumps(query, sort_keys=True)
        with self._lock:
            if line not in self._cache:
                assert self._proc.stdin is not None and self._proc.stdout is not None
                self._proc.stdin.write(line + "\n")
                self._proc.stdin.flush()
                answer = json.loads(self._proc.stdout.readline())
                if answer["result"] == "SimulationError":
                    raise RuntimeError(f"the IAM simulator refused {line}: {answer['errors']}")
                self._cache[line] = bool(answer["allowed"])
            return self._cache[line]

    def close(self) -> None:
        self._proc.terminate()
        self._proc.wait()


# ------------------------------------------------------------------------- requests -> actions


@dataclass(frozen=True)
class Need:
    """One IAM authorisation a request needs: action, resource ARN, condition context."""

    action: str
    resource: str
    context: tuple[tuple[str, str], ...] = ()


def _conditional(headers: Any) -> tuple[tuple[str, str], ...]:
    return tuple((f"s3:{h}", str(headers[h])) for h in ("if-none-match", "if-match") if headers.get(h) is not None)


def s3_needs(method: str, path: str, query: dict[str, str], headers: Any, body: bytes) -> list[Need]:
    """The IAM authorisations S3 checks for one REST request (path-style ``/bucket/key``)."""
    bucket, _, key = path.lstrip("/").partition("/")
    key = urllib.parse.unquote(key)
    bucket_arn = f"arn:aws:s3:::{bucket}"
    obj = f"{bucket_arn}/{key}"
    prefix = (("s3:prefix", query["prefix"]),) if "prefix" in query else ()
    if not key:
        if method == "POST" and "delete" in query:
            return [Need(action, f"{bucket_arn}/{k}") for k, action in deleted_keys(body)]
        if method == "HEAD":
            return [Need("s3:ListBucket", bucket_arn)]
        if method == "GET" and "versions" in query:
            return [Need("s3:ListBucketVersions", bucket_arn, prefix)]
        if method == "GET" and "versioning" in query:
            return [Need("s3:GetBucketVersioning", bucket_arn)]
        if method == "GET" and "object-lock" in query:
            return [Need("s3:GetBucketObjectLockConfiguration", bucket_arn)]
        if method == "GET" and "uploads" in query:  # s3:prefix is no condition key of this action
            return [Need("s3:ListBucketMultipartUploads", bucket_arn)]
        if method == "GET" and not set(query) - {
            "list-type",
            "prefix",
            "delimiter",
            "continuation-token",
            "max-keys",
            "start-after",
            "encoding-type",
            "fetch-owner",
        }:
            return [Need("s3:ListBucket", bucket_arn, prefix)]
        return [Need(f"unmapped:{method}:{sorted(query)}", bucket_arn)]
    source = headers.get("x-amz-copy-source")
    copied: list[Need] = []
    if source is not None:
        src, _, version = urllib.parse.unquote(source).lstrip("/").partition("?versionId=")
        copied = [Need("s3:GetObjectVersion" if version else "s3:GetObject", f"arn:aws:s3:::{src}")]
    if method in ("GET", "HEAD"):
        if "uploadId" in query:
            return [Need("s3:ListMultipartUploadParts", obj)]
        return [Need("s3:GetObjectVersion" if "versionId" in query else "s3:GetObject", obj)]
    if method == "PUT":
        return [Need("s3:PutObject", obj, () if "partNumber" in query else _conditional(headers)), *copied]
    if method == "POST" and ("uploads" in query or "uploadId" in query):
        return [Need("s3:PutObject", obj, _conditional(headers) if "uploadId" in query else ())]
    if method == "DELETE":
        if "uploadId" in query:
            return [Need("s3:AbortMultipartUpload", obj)]
        return [Need("s3:DeleteObjectVersion" if "versionId" in query else "s3:DeleteObject", obj)]
    return [Need(f"unmapped:{method}:{sorted(query)}", obj)]


def deleted_keys(body: bytes) -> list[tuple[str, str]]:
    """(key, IAM action) of each object a DeleteObjects request names."""
    out = []
    for o in ET.fromstring(body).iter():
        if o.tag.rpartition("}")[2] != "Object":
            continue
        fields = {c.tag.rpartition("}")[2]: c.text or "" for c in o}
        out.append((fields["Key"], "s3:DeleteObjectVersion" if fields.get("VersionId") else "s3:DeleteObject"))
    return out


def other_needs(service: str, method: str, path: str, query: dict[str, str], headers: Any, body: bytes) -> list[Need]:
    """The IAM authorisation for a call to Step Functions, Lambda, SQS, Glue (JSON protocols) or
    EventBridge Scheduler (REST)."""
    target = str(headers.get("x-amz-target", ""))
    data = json.loads(body or b"{}") if body.strip().startswith(b"{") else {}
    if service == "states":
        op = target.rpartition(".")[2]
        resource = data.get("stateMachineArn") or data.get("executionArn") or "*"
        return [Need(f"states:{op}", resource)]
    if service == "lambda" and path.endswith("/invocations"):
        name = urllib.parse.unquote(path.split("/functions/")[1].split("/")[0])
        arn = name if name.startswith("arn:") else f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"
        return [Need("lambda:InvokeFunction", arn)]
    if service == "sqs" and target:
        op = target.rpartition(".")[2]
        url = str(data.get("QueueUrl", ""))
        return [Need(f"sqs:{op}", f"arn:aws:sqs:{REGION}:{ACCOUNT}:{url.rstrip('/').rpartition('/')[2]}")]
    if service == "glue" and target:
        # a table call needs the action on the catalog, the database and the table alike
        op, database = target.rpartition(".")[2], str(data.get("DatabaseName", ""))
        table = str(data.get("Name") or data.get("TableInput", {}).get("Name", ""))
        glue = f"arn:aws:glue:{REGION}:{ACCOUNT}"
        resources = [f"{glue}:catalog", f"{glue}:database/{database}", f"{glue}:table/{database}/{table}"]
        return [Need(f"glue:{op}", r) for r in resources]
    if service == "scheduler" and path.startswith("/schedules/") and method == "GET":
        name = urllib.parse.unquote(path.removeprefix("/schedules/"))
        group = query.get("groupName", "default")
        return [Need("scheduler:GetSchedule", f"arn:aws:scheduler:{REGION}:{ACCOUNT}:schedule/{group}/{name}")]
    return [Need(f"unmapped:{service}:{target or path}", "*")]


# ------------------------------------------------------------------------------- the front


@dataclass(frozen=True)
class Principal:
    """A role of the template, as a test calls with it: its name and its identity policies."""

    name: str
    policies: dict[str, Any]

    @property
    def arn(self) -> str:
        return f"arn:aws:iam::{ACCOUNT}:role/{self.name}"


@dataclass(frozen=True)
class Refusal:
    """A request (or one key of it) that IAM refused."""

    principal: str
    method: str
    path: str
    need: Need
    reason: str


@dataclass
class IamFront:
    """An HTTP front for the moto server at ``upstream`` that enforces IAM for the principals
    registered by access key; ``bucket_policy`` applies to requests to the table bucket."""

    upstream: str
    bucket: str
    bucket_policy: dict[str, Any]
    principals: dict[str, Principal] = field(default_factory=dict)
    refusals: list[Refusal] = field(default_factory=list)
    endpoint: str = ""

    def __post_init__(self) -> None:
        self.simulator = Simulator()

    def add(self, principal: Principal) -> dict[str, str]:
        """Register ``principal``; the environment a process calls the front with as that role."""
        key = f"AKIA{hashlib.sha256(principal.name.encode()).hexdigest()[:16].upper()}"
        self.principals[key] = principal
        return {
            "AWS_ACCESS_KEY_ID": key,
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ENDPOINT_URL": self.endpoint,
        }

    def allows(self, principal: Principal, need: Need) -> bool:
        """Whether IAM allows ``need`` to ``principal`` (identity policies, then the bucket policy)."""
        if need.action.startswith("unmapped:"):
            return False
        to_bucket = need.resource.startswith(f"arn:aws:s3:::{self.bucket}")
        query = {
            "principal": principal.arn,
            "account": ACCOUNT,
            "policies": principal.policies,
            "action": need.action,
            "resource": need.resource,
            "context": {"aws:SecureTransport": "true", **dict(need.context)},
        }
        if to_bucket:
            query["resourcePolicy"] = self.bucket_policy
        return self.simulator.allowed(query)

    @contextmanager
    def serving(self) -> Iterator[str]:
        """Serve on 127.0.0.1 while the block runs; yields the endpoint URL."""
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self.endpoint
        finally:
            server.shutdown()
            server.server_close()
            self.simulator.close()


def _handler(front: IamFront) -> type[BaseHTTPRequestHandler]:
    upstream = urllib.parse.urlsplit(front.upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

        def do_GET(self) -> None:
            self._serve()

        do_HEAD = do_PUT = do_POST = do_DELETE = do_GET

        def _body(self) -> bytes:
            if "chunked" in self.headers.get("Transfer-Encoding", ""):
                chunks = []
                while size := int(self.rfile.readline().split(b";")[0], 16):
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
                self.rfile.readline()
                return b"".join(chunks)
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _serve(self) -> None:
            body = self._body()
            split = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(split.query, keep_blank_values=True))
            auth = self.headers.get("Authorization", "")
            key = auth.partition("Credential=")[2].partition("/")[0]
            service = auth.partition("Credential=")[2].split("/")[3] if "Credential=" in auth else ""
            principal = front.principals.get(key)
            if principal is None:
                return self._answer(403, {}, _s3_error("InvalidAccessKeyId", f"unknown access key {key!r}"))
            if service == "s3":
                needs = s3_needs(self.command, split.path, query, self.headers, body)
            else:
                needs = other_needs(service, self.command, split.path, query, self.headers, body)
            denied = [n for n in needs if not front.allows(principal, n)]
            for n in denied:
                front.refusals.append(Refusal(principal.name, self.command, self.path, n, "not allowed"))
            if service == "s3" and self.command == "POST" and "delete" in query and denied:
                return self._delete_some(body, {n.resource for n in denied})
            if denied:
                if service == "s3":
                    return self._answer(
                        403, {}, _s3_error("AccessDenied", f"{denied[0].action} on {denied[0].resource}")
                    )
                error = {"__type": "AccessDeniedException", "message": f"{denied[0].action} on {denied[0].resource}"}
                return self._answer(400, {"x-amzn-ErrorType": "AccessDeniedException"}, json.dumps(error).encode())
            status, headers, answer = self._forward(self.command, self.path, dict(self.headers), body)
            if (
                service == "s3"
                and status == 404
                and self.command in ("GET", "HEAD")
                and needs[0].action in ("s3:GetObject", "s3:GetObjectVersion")
            ):  # a missing bucket setting (no Object Lock configuration) is a 404 whoever asks
                bucket, _, missing = split.path.lstrip("/").partition("/")
                listing = Need(
                    "s3:ListBucket", f"arn:aws:s3:::{bucket}", (("s3:prefix", urllib.parse.unquote(missing)),)
                )
                if not front.allows(principal, listing):
                    front.refusals.append(Refusal(principal.name, self.command, self.path, listing, "missing key"))
                    return self._answer(403, {}, _s3_error("AccessDenied", "no s3:ListBucket for a missing key"))
            self._answer(status, headers, answer)

        def _forward(
            self, method: str, path: str, headers: dict[str, str], body: bytes
        ) -> tuple[int, dict[str, str], bytes]:
            conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=300)
            headers = {k: v for k, v in headers.items() if k.lower() not in ("transfer-encoding", "connection")}
            headers["Content-Length"] = str(len(body))
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
            out = {k: v for k, v in response.getheaders() if k.lower() not in ("transfer-encoding", "connection")}
            conn.close()
            if method != "HEAD":
                out["Content-Length"] = str(len(data))
            return response.status, out, data

        def _delete_some(self, body: bytes, refused: set[str]) -> None:
            """DeleteObjects with some keys refused: the rest are deleted, the refused answered
            with per-key AccessDenied errors in the 200 response, as S3 does."""
            root = ET.fromstring(body)
            bucket = urllib.parse.urlsplit(self.path).path.strip("/")
            kept = 0
            errors = []
            for o in list(root):
                if o.tag.rpartition("}")[2] != "Object":
                    continue
                k = next(c.text for c in o if c.tag.rpartition("}")[2] == "Key") or ""
                if f"arn:aws:s3:::{bucket}/{k}" in refused:
                    root.remove(o)
                    errors.append(k)
                else:
                    kept += 1
            result = ET.Element("DeleteResult", xmlns=S3_NS)
            if kept:
                forwarded = ET.tostring(root)
                headers = {
                    k: v for k, v in self.headers.items() if not k.lower().startswith(("x-amz-checksum", "content-md5"))
                }
                headers["Content-MD5"] = base64.b64encode(hashlib.md5(forwarded).digest()).decode()
                _, _, answer = self._forward("POST", self.path, headers, forwarded)
                result = ET.fromstring(answer)
            for k in errors:
                error = ET.SubElement(result, "Error")
                ET.SubElement(error, "Key").text = k
                ET.SubElement(error, "Code").text = "AccessDenied"
                ET.SubElement(error, "Message").text = "Access Denied"
            self._answer(200, {"Content-Type": "application/xml"}, ET.tostring(result, xml_declaration=True))

        def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            if "Content-Length" not in headers:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

    return Handler


def _s3_error(code: str, message: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>{message}</Message></Error>'.encode()
    )


def principal_of(template: Template, function_prefix: str) -> Principal:
    """The execution role of the function whose logical id starts with ``function_prefix``."""
    role = template.role_of(template.function(function_prefix))
    return Principal(role, template.role_policies(role))


def role_principal(template: Template, role: str) -> Principal:
    """A role of the template by logical id (the EMR job role, a workflow's role)."""
    return Principal(role, template.role_policies(role))
