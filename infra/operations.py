"""Who is told when something breaks: an SNS topic (an email subscription from the ``alertEmail``
context), alarms on dead letters, failed workflow runs, function errors, unverified erasures and
commit conflicts, an EventBridge rule for landed files moved to ``landing-failed/`` (one alert
per file: the ``.reason.json`` written beside it), and one CloudWatch dashboard of the deployment.

Alarms that watch many resources of one kind (a dead-letter queue and an ingest function per
table) are metric-math alarms over up to ten metrics each, CloudWatch's limit, so a deployment
of many tables adds an alarm per ten tables, not per table, to CloudFormation's 500 resources.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from castable.deployment.layout import FAILED_LANDING_PREFIX
from infra.patterns import objects_created

NAMESPACE = "castable"
"""The namespace of the metrics castable's log filters make."""
ALARM_METRICS = 10
"""The most metrics one CloudWatch alarm's metric math may use."""
PERIOD = Duration.minutes(5)
UNVERIFIED = "ErasureNotVerified"
"""The error an erasure run ends with when its trace search found an erased value or could not run."""
CONFLICT = "CommitConflictError"
"""castable's error for a commit refused because a concurrent commit changed what it read or replaced."""
COMMITTERS = ("Commit", "Tombstone", "Maintenance", "Ingest")
"""The functions (by construct id prefix) that commit, and so may log a conflict."""


class Operations(Construct):
    """Alarms, their topic and the dashboard of one deployment."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket,
        functions: Sequence[lambda_.Function],
        dead_letters: Sequence[sqs.IQueue],
        workflows: Sequence[sfn.StateMachine],
        erasure_logs: logs.ILogGroup,
        email: str | None,
    ) -> None:
        super().__init__(scope, construct_id)
        key = kms.Key(self, "AlertsKey", enable_key_rotation=True, description="castable: the alerts topic")
        for service in ("cloudwatch.amazonaws.com", "events.amazonaws.com"):  # they publish to the topic
            key.add_to_resource_policy(
                iam.PolicyStatement(
                    actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                    principals=[iam.ServicePrincipal(service)],
                    resources=["*"],
                )
            )
        self.topic = sns.Topic(self, "Alerts", display_name="castable alerts", master_key=key, enforce_ssl=True)
        if email:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
        self.alarms: list[cw.Alarm] = []
        queue_depth = [
            q.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum") for q in dead_letters
        ]
        self._alarm_any(
            "DeadLetters",
            queue_depth,
            "MAX",
            "messages wait in a dead-letter queue: landed files or events were not processed",
        )
        errors = [fn.metric_errors(period=PERIOD, statistic="Sum") for fn in functions]
        self._alarm_any("FunctionErrors", errors, "SUM", "a castable function failed")
        for machine in workflows:
            runs = [
                machine.metric_failed(period=PERIOD, statistic="Sum"),
                machine.metric_timed_out(period=PERIOD, statistic="Sum"),
                machine.metric_aborted(period=PERIOD, statistic="Sum"),
            ]
            self._alarm_any(f"{machine.node.id}Runs", runs, "SUM", "a workflow run failed, timed out or was aborted")
        self._count(UNVERIFIED, "ErasureWorkflow", erasure_logs)
        self._alarm_any(UNVERIFIED, [_logged(UNVERIFIED)], "SUM", "an erasure ended unverified: see its receipt")
        for fn in functions:
            if fn.node.id.startswith(COMMITTERS):
                self._count(CONFLICT, fn.node.id, fn.log_group)
        self._alarm_any(CONFLICT, [_logged(CONFLICT)], "SUM", "a commit was refused: a concurrent commit conflicted")
        events.Rule(
            self,
            "LandingFailed",
            description="castable: a landed file was moved to landing-failed/ (its .reason.json says why)",
            event_pattern=objects_created(bucket, [{"wildcard": f"{FAILED_LANDING_PREFIX}*.reason.json"}]),
            targets=[targets.SnsTopic(self.topic)],
        )
        self.dashboard = self._dashboard(functions, queue_depth, workflows)

    def _count(self, error: str, where: str, log_group: logs.ILogGroup) -> None:
        """A metric of how often ``error`` appears in ``log_group`` (made beside the log group,
        so an ingest stack's filters stay in that stack)."""
        logs.MetricFilter(
            cast(Construct, log_group),
            f"{error}In{where}",
            log_group=log_group,
            metric_namespace=NAMESPACE,
            metric_name=error,
            filter_pattern=logs.FilterPattern.literal(f'"{error}"'),
            metric_value="1",
            default_value=0,
        )

    def _alarm_any(self, name: str, metrics: Sequence[cw.Metric], combine: str, meaning: str) -> None:
        """Alarms that fire when any of ``metrics`` reaches 1 in a period, ten metrics to an alarm."""
        for start in range(0, len(metrics), ALARM_METRICS):
            chunk = metrics[start : start + ALARM_METRICS]
            suffix = "" if len(metrics) <= ALARM_METRICS else str(start // ALARM_METRICS + 1)
            watched: cw.Metric | cw.MathExpression = (
                chunk[0]
                if len(chunk) == 1
                else cw.MathExpression(
                    expression=f"{combine}(METRICS())",
                    using_metrics={f"m{i}": m for i, m in enumerate(chunk)},
                    period=PERIOD,
                    label=name,
                )
            )
            alarm = watched.create_alarm(
                self,
                f"{name}{suffix}Alarm",
                alarm_description=f"castable: {meaning}",
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            )
            alarm.add_alarm_action(cw_actions.SnsAction(self.topic))
            self.alarms.append(alarm)

    def _dashboard(
        self,
        functions: Sequence[lambda_.Function],
        queue_depth: Sequence[cw.Metric],
        workflows: Sequence[sfn.StateMachine],
    ) -> cw.Dashboard:
        """Errors and p99 duration of every function, workflow runs, dead letters, logged errors."""
        dashboard = cw.Dashboard(self, "Dashboard")
        errors = [fn.metric_errors(period=PERIOD) for fn in functions]
        dashboard.add_widgets(
            cw.GraphWidget(title="Function errors", left=errors, width=12),
            cw.GraphWidget(
                title="Function duration (p99)",
                left=[fn.metric_duration(period=PERIOD, statistic="p99") for fn in functions],
                width=12,
            ),
        )
        dashboard.add_widgets(
            cw.GraphWidget(
                title="Workflow runs",
                left=[m for w in workflows for m in _runs(w)],
                width=12,
            ),
            cw.GraphWidget(title="Dead letters waiting", left=list(queue_depth), width=12),
        )
        dashboard.add_widgets(
            cw.GraphWidget(title="Logged errors", left=[_logged(UNVERIFIED), _logged(CONFLICT)], width=24)
        )
        dashboard.add_widgets(*(_by_table(name, title) for name, title in PER_TABLE.items()))
        return dashboard


PER_TABLE = {
    "RowsIngested": "Rows ingested, by table",
    "FilesDeadLettered": "Files dead-lettered, by table",
    "IngestFailures": "Failed ingest commits, by table",
}
"""The shared functions' metrics (castable's namespace, ``table`` dimension) graphed a line per table."""


def _by_table(metric: str, title: str) -> cw.GraphWidget:
    """A line per table of ``metric``, whichever tables there are: a search over the ``table``
    dimension, so the dashboard needs no change when a table is created."""
    search = cw.MathExpression(
        expression=f"SEARCH('{{{NAMESPACE},service,table}} MetricName=\"{metric}\"', 'Sum', {PERIOD.to_seconds()})",
        using_metrics={},
        label=metric,
        period=PERIOD,
    )
    return cw.GraphWidget(title=title, left=[search], width=8)


def _runs(workflow: sfn.StateMachine) -> list[cw.Metric]:
    """A workflow's succeeded and failed runs."""
    return [workflow.metric_succeeded(period=PERIOD), workflow.metric_failed(period=PERIOD)]


def _logged(error: str) -> cw.Metric:
    """How often the functions logged ``error`` (the metric of its log filters)."""
    return cw.Metric(namespace=NAMESPACE, metric_name=error, period=PERIOD, statistic="Sum")
