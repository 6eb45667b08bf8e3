"""Lambda without Docker for tests: moto runs function code in containers, so tests replace its
invoke with a call of the real handler in the test process (moto's own error payload shape)."""

from __future__ import annotations

import base64
import importlib
import io
import json
import traceback
import uuid
import zipfile
from typing import Any


def run_handler_in_process(self: Any, event: str | dict | None = None) -> tuple[str, bool, str]:
    """Stand-in for ``moto.awslambda.models.LambdaFunction._invoke_lambda``."""
    module, function = self.handler.rsplit(".", 1)
    handler = getattr(importlib.import_module(module), function)
    context = type(
        "Context",
        (),
        {
            "function_name": self.function_name,
            "memory_limit_in_mb": 1024,
            "invoked_function_arn": self.function_arn,
            "aws_request_id": str(uuid.uuid4()),
        },
    )()
    try:
        payload = event if isinstance(event, dict) else json.loads(event or "{}")
        return json.dumps(handler(payload, context)), False, ""
    except Exception as e:
        payload = {
            "errorType": type(e).__name__,
            "errorMessage": str(e),
            "stackTrace": traceback.format_exc().splitlines(),
        }
        return json.dumps(payload), True, ""


def function_code() -> bytes:
    """A placeholder deployment package (the stand-in never runs it)."""
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as z:
        z.writestr("handler.py", "")
    return code.getvalue()


def sqs_event(bucket: str, keys: list[str], bodies: list[str] | None = None) -> dict:
    """An SQS batch whose messages are EventBridge's S3 "Object Created" events, one per key (as
    a rule delivers them to a queue, and the route function forwards them), then ``bodies`` as
    they are."""
    records = []
    for i, key in enumerate(keys):
        detail = {"version": "0", "bucket": {"name": bucket}, "object": {"key": key, "size": 1, "etag": "x"}}
        body = {"version": "0", "source": "aws.s3", "detail-type": "Object Created", "detail": detail}
        records.append(
            {
                "messageId": f"m{i}",
                "receiptHandle": "h",
                "body": json.dumps(body),
                "attributes": {},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:landing",
                "awsRegion": "us-east-1",
            }
        )
    for j, raw in enumerate(bodies or []):
        template = records[0] if records else sqs_event(bucket, ["unused"])["Records"][0]
        records.append({**template, "messageId": f"raw{j}", "body": raw})
    return {"Records": records}


def start_executions_as_aws_does(monkeypatch: Any) -> None:
    """moto's ``states:startExecution`` task integration hands the ASL's parameter names
    (``StateMachineArn``, ``Name``, ``Input``) to botocore as they are, which knows the API's
    (``stateMachineArn``, ...), and reads the API's answer by the ASL's names (``ExecutionArn``,
    ``Status``): its name mappings are stubs, so every such task fails with ``States.Runtime``.
    Patch moto (with ``monkeypatch``) to map both ways, as AWS does."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sfn import (
        StateTaskServiceSfn,
    )

    normalise = StateTaskServiceSfn._normalise_parameters

    def camel_case(self: Any, parameters: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        normalise(self, parameters, *args, **kwargs)
        for key in [k for k in parameters if k[:1].isupper()]:
            parameters[key[0].lower() + key[1:]] = parameters.pop(key)

    def pascal_case(self: Any, response: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(response, dict):
            for key in [k for k in response if k[:1].islower()]:
                response[key[0].upper() + key[1:]] = response.pop(key)

    monkeypatch.setattr(StateTaskServiceSfn, "_normalise_parameters", camel_case)
    monkeypatch.setattr(StateTaskServiceSfn, "_normalise_response", pascal_case)


def fail_distributed_maps_as_aws_does(monkeypatch: Any) -> None:
    """moto's Distributed Map counts its failed child executions and then succeeds anyway; AWS
    fails the Map state with ``States.ExceedToleratedFailureThreshold`` once the failures pass
    ``ToleratedFailureCount`` or ``ToleratedFailurePercentage`` (both 0 unless set). Patch moto
    (with ``monkeypatch``) to do what AWS does, so a failed splice fails its erasure here too."""
    from moto.stepfunctions.parser.api import HistoryEventType, MapRunFailedEventDetails
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
        FailureEvent,
        FailureEventException,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
        StatesErrorNameType,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.distributed_iteration_component import (
        DistributedIterationComponent,
    )
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

    original = DistributedIterationComponent._map_run

    def map_run(self: Any, env: Any, eval_input: Any) -> None:
        original(self, env, eval_input)
        counter = eval_input.map_run_record.item_counter
        failed, total = counter.failed.get(), counter.total.get()
        count, percentage = eval_input.tolerated_failure_count or 0, eval_input.tolerated_failure_percentage or 0
        if failed > count or (total and 100 * failed / total > percentage):
            error = StatesErrorName(typ=StatesErrorNameType.StatesExceedToleratedFailureThreshold)
            cause = f"{failed} of {total} items failed"
            raise FailureEventException(
                failure_event=FailureEvent(
                    env=env,
                    error_name=error,
                    event_type=HistoryEventType.MapRunFailed,
                    # moto declares EventDetails total, yet builds it with one key as here
                    event_details=EventDetails(  # type: ignore[typeddict-item]
                        mapRunFailedEventDetails=MapRunFailedEventDetails(error=error.error_name, cause=cause)
                    ),
                )
            )

    monkeypatch.setattr(DistributedIterationComponent, "_map_run", map_run)


def api_gateway_event(
    method: str, path: str, body: Any = None, *, query: dict[str, str] | None = None, stage: str = "iceberg"
) -> dict[str, Any]:
    """The proxy event API Gateway's REST API sends its Lambda for a SigV4-signed request to its
    ``{proxy+}`` resource (binary media types ``*/*``: the body arrives base64-encoded)."""
    data = b"" if body is None else json.dumps(body).encode()
    caller = "arn:aws:iam::123456789012:role/spark-job"
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": {"Accept-Encoding": "gzip, deflate", "Content-Type": "application/json", "Host": "api.example"},
        "multiValueHeaders": {},
        "queryStringParameters": query,
        "multiValueQueryStringParameters": None if query is None else {k: [v] for k, v in query.items()},
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "/{proxy+}",
            "httpMethod": method,
            "path": f"/{stage}{path}",
            "stage": stage,
            "requestId": str(uuid.uuid4()),
            "identity": {"userArn": caller, "caller": "AROAEXAMPLE:spark", "accessKey": "ASIAEXAMPLE"},
            "accountId": "123456789012",
            "apiId": "abcdef1234",
        },
        "body": base64.b64encode(data).decode() if data else None,
        "isBase64Encoded": bool(data),
    }
