"""cdk-nag's AWS Solutions checks on the app, with every accepted finding justified here."""

from __future__ import annotations

from aws_cdk import Acknowledgment, App, Stack, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

from castable.layout import ERASURE_PLAN_PREFIX, MAINTENANCE_PLAN_PREFIX
from castable.store.probe import PROBE_PREFIX
from infra.stack import EMR_ARTIFACTS, EMR_LOGS, ERASURE_RESULTS, MAINTENANCE_RESULTS, CastableStack

BASIC_EXECUTION = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"


def _logical_id(construct: IConstruct) -> str:
    stack = Stack.of(construct)
    return str(stack.resolve(stack.get_logical_id(construct.node.default_child)))  # type: ignore[arg-type]


def accepted_findings(stack: CastableStack) -> dict[str, str]:
    """Each accepted finding (cdk-nag's exact id) and why it is acceptable."""
    bucket = _logical_id(stack.bucket)
    prefixes = [f"{EMR_ARTIFACTS}*", f"{EMR_LOGS}*", f"{ERASURE_RESULTS}*", f"{MAINTENANCE_RESULTS}*"]
    roots = [(f"tables/{t.name}/", t.name) for t in stack.config.tables]
    roots += [(f"databases/{d.name}/", d.name) for d in stack.config.databases]
    for root, name in roots:
        prefixes += [f"{root}*", f"{root}data/*", f"landing/{name}/*"]
        prefixes += [f"landing-failed/landing/{name}/*", f"{root}{PROBE_PREFIX}*"]
        prefixes += [f"{root}{ERASURE_PLAN_PREFIX}*", f"{root}{MAINTENANCE_PLAN_PREFIX}*"]
    prefixes += [f"databases/{d.name}/*/data/*" for d in stack.config.databases]
    prefixes += [f"databases/{d.name}/*/{PROBE_PREFIX}*" for d in stack.config.databases]
    findings = {
        f"AwsSolutions-IAM4[{BASIC_EXECUTION}]": "AWSLambdaBasicExecutionRole only lets a function write its own "
        "logs, as AWS recommends; every data permission is an inline, prefix-scoped statement.",
        "AwsSolutions-L1": "python3.12 is pinned on purpose: the bundled manylinux_2_28 wheels (pyarrow, "
        "pyroaring) are installed for that interpreter; move runtime and bundle together.",
        "AwsSolutions-IAM5[Resource::*]": "X-Ray (PutTraceSegments, PutTelemetryRecords) and CloudWatch Logs "
        "delivery actions of Lambda tracing and state-machine logging have no resource-level permissions.",
    }
    for prefix in prefixes:
        findings[f"AwsSolutions-IAM5[Resource::<{bucket}.Arn>/{prefix}]"] = (
            f"Objects under {prefix[:-1]} get run-time UUID keys, so the grant cannot name them; it is limited "
            "to that prefix of the table bucket."
        )
    for machine in (stack.erasure, stack.maintenance):
        executions = (
            f"arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:<{_logical_id(machine)}.Name>/*"
        )
        findings[f"AwsSolutions-IAM5[Resource::{executions}]"] = (
            "A workflow's Distributed Map describes and stops its own child executions, whose names "
            "Step Functions makes at run time; the grant is limited to this state machine's executions."
        )
    for fn in stack.functions.values():
        findings[f"AwsSolutions-IAM5[Resource::<{_logical_id(fn)}.Arn>:*]"] = (
            "grant_invoke adds ':*' so that published versions and aliases of this one function can be invoked."
        )
    return findings


def check(app: App, stack: CastableStack) -> None:
    """Fail synthesis on any AWS Solutions finding that is not acknowledged with a reason."""
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    for finding, reason in accepted_findings(stack).items():
        Validations.of(stack).acknowledge(Acknowledgment(id=f"AwsSolutions::{finding}", reason=reason))
    for scope, finding, reason in accepted_resource_findings(stack):
        Validations.of(scope).acknowledge(Acknowledgment(id=f"AwsSolutions::{finding}", reason=reason))


def accepted_resource_findings(stack: CastableStack) -> list[tuple[IConstruct, str, str]]:
    """Findings accepted on one resource only (the finding's id does not name it)."""
    return [
        (
            stack.schedule_dead_letters,
            "AwsSolutions-SQS3",
            "This queue is itself a dead-letter queue: EventBridge Scheduler's, for maintenance starts "
            "that failed (cdk-nag only recognises queues that SQS queues redrive to).",
        )
    ]
