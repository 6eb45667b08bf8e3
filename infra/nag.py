"""cdk-nag's AWS Solutions checks on the app, with every accepted finding justified here."""

from __future__ import annotations

from aws_cdk import Acknowledgment, App, Stack, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

from castable.deployment.layout import FAILED_LANDING_PREFIX, MAINTENANCE_DUE_PREFIX
from castable.format.layout import ERASURE_PLAN_PREFIX, ICEBERG_PREFIX, MAINTENANCE_PLAN_PREFIX
from castable.store.probe import PROBE_PREFIX
from infra.emr import EMR_ARTIFACTS, EMR_LOGS
from infra.iceberg_rest import STAGE
from infra.stack import ERASURE_RESULTS, MAINTENANCE_RESULTS, ROOTS, CastableStack

BASIC_EXECUTION = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"


def _logical_id(construct: IConstruct) -> str:
    stack = Stack.of(construct)
    return str(stack.resolve(stack.get_logical_id(construct.node.default_child)))  # type: ignore[arg-type]


def _prefixes_reason(prefix: str) -> str:
    return (
        f"Objects under {prefix[:-1]} get run-time UUID keys, so the grant cannot name them; it is limited "
        "to that prefix of the table bucket."
    )


def _bucket_arn(stack: CastableStack) -> str:
    """The table bucket's ARN as cdk-nag prints it: the bucket resource's attribute, or an existing bucket's ARN."""
    if stack.config.bucket_name is not None:
        return f"arn:<AWS::Partition>:s3:::{stack.config.bucket_name}"
    return f"<{_logical_id(stack.bucket)}.Arn>"


def accepted_findings(stack: CastableStack) -> dict[str, str]:
    """Each accepted finding of the main stack (cdk-nag's exact id) and why it is acceptable."""
    bucket = _bucket_arn(stack)
    prefixes = [f"{EMR_ARTIFACTS}*", f"{EMR_LOGS}*", f"{ERASURE_RESULTS}*", f"{MAINTENANCE_RESULTS}*", "landing/*"]
    prefixes += [f"{FAILED_LANDING_PREFIX}landing/*", f"{MAINTENANCE_DUE_PREFIX}*"]
    prefixes += [f"{root}{PROBE_PREFIX}*" for root in ROOTS]
    prefixes += [f"{root}*" for root in ROOTS] + ["tables/*/data/*", "databases/*/*/data/*"]
    prefixes += [f"{root}*/{plans}*" for root in ROOTS for plans in (ERASURE_PLAN_PREFIX, MAINTENANCE_PLAN_PREFIX)]
    prefixes += [f"{root}*/{under}*" for root in ROOTS for under in (ICEBERG_PREFIX, PROBE_PREFIX)]
    findings = {
        f"AwsSolutions-IAM4[{BASIC_EXECUTION}]": "AWSLambdaBasicExecutionRole only lets a function write its own "
        "logs, as AWS recommends; every data permission is an inline, prefix-scoped statement.",
        "AwsSolutions-L1": "python3.12 is pinned on purpose: the bundled manylinux_2_28 wheels (pyarrow, "
        "pyroaring) are installed for that interpreter; move runtime and bundle together.",
        "AwsSolutions-IAM5[Resource::*]": "X-Ray (PutTraceSegments, PutTelemetryRecords) and CloudWatch Logs "
        "delivery actions of Lambda tracing and state-machine logging have no resource-level permissions.",
    }
    for prefix in prefixes:
        findings[f"AwsSolutions-IAM5[Resource::{bucket}/{prefix}]"] = _prefixes_reason(prefix)
    for machine in (stack.erasure, stack.maintenance, stack.maintain_due):
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
    glue_tables = f"arn:<AWS::Partition>:glue:<AWS::Region>:<AWS::AccountId>:table/{stack.config.glue_database}/*"
    findings[f"AwsSolutions-IAM5[Resource::{glue_tables}]"] = (
        "The catalog function registers any table of the bucket that turns publish.iceberg on, under a name "
        "known at run time; the grant is limited to reading, creating and updating tables of the deployment's "
        "own Glue database."
    )
    account = "<AWS::Region>:<AWS::AccountId>"
    maintenance_runs = f"arn:<AWS::Partition>:states:{account}:execution:<{_logical_id(stack.maintenance)}.Name>:*"
    findings[f"AwsSolutions-IAM5[Resource::{maintenance_runs}]"] = (
        "The maintain-due workflow waits for the maintenance runs it starts (named by table and time at run "
        "time), and stops them if it is stopped; the grant is limited to the maintenance workflow's executions."
    )
    return findings


def check(app: App, stack: CastableStack) -> None:
    """Fail synthesis on any AWS Solutions finding that is not acknowledged with a reason."""
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    findings = accepted_findings(stack)
    for finding, reason in findings.items():
        Validations.of(stack).acknowledge(Acknowledgment(id=f"AwsSolutions::{finding}", reason=reason))
    for scope, finding, reason in accepted_resource_findings(stack):
        Validations.of(scope).acknowledge(Acknowledgment(id=f"AwsSolutions::{finding}", reason=reason))


def accepted_resource_findings(stack: CastableStack) -> list[tuple[IConstruct, str, str]]:
    """Findings accepted on one resource only (the finding's id does not name it)."""
    found: list[tuple[IConstruct, str, str]] = [
        (
            stack.schedule_dead_letters,
            "AwsSolutions-SQS3",
            "This queue is itself a dead-letter queue: EventBridge Scheduler's, for starts of the "
            "maintain-due workflow that failed (cdk-nag only recognises queues that SQS queues redrive to).",
        )
    ]
    rest = stack.iceberg_rest
    if rest is not None:
        invoke = (
            f"arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:<{_logical_id(rest.api)}>/{STAGE}/*/*"
        )
        found += [
            (
                rest,
                "AwsSolutions-APIG2",
                "The catalog validates every request body against the Iceberg REST spec's models (pyiceberg's) "
                "and answers the spec's 400; API Gateway's validation would need the whole spec as models.",
            ),
            (
                rest,
                "AwsSolutions-APIG3",
                "Every request is authorized by IAM (SigV4); nothing is anonymous. Associate a WAF web ACL "
                "with the stage yourself if your account requires one.",
            ),
            (
                rest,
                "AwsSolutions-APIG6",
                "Access logs record every request, and the function logs every refused one; execution "
                "logging needs the account-wide API Gateway CloudWatch role, which one stack should not take over.",
            ),
            (rest, "AwsSolutions-COG4", "The API is authorized by IAM (SigV4), as Iceberg clients sign requests."),
            (
                rest,
                f"AwsSolutions-IAM5[Resource::{invoke}]",
                "Clients call every route of the catalog (namespaces, tables, commits) under this one API's stage.",
            ),
        ]
    return found
