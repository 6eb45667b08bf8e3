"""The Iceberg REST catalog on AWS (the ``iceberg_catalog`` option): ``lambdas/iceberg_rest.py``
behind an API Gateway REST API that authorizes every request with IAM (SigV4), so Iceberg
engines (Spark on EMR, Trino, pyiceberg, DuckDB) write the deployment's tables through
castable's commits. Callers need ``execute-api:Invoke`` on the API: the ``IcebergCatalogClients``
managed policy grants it, and the EMR job role has it."""

from __future__ import annotations

from aws_cdk import CfnOutput
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.bundling import Package
from infra.parts import function, grant_tables

STAGE = "iceberg"
"""The API's stage: a client's catalog ``uri`` is ``https://<api>.execute-api.<region>.amazonaws.com/iceberg``."""
TIMEOUT = 29
"""Seconds a request may take: API Gateway's integration timeout. A commit cut short by it is
castable's crash mid-commit, and the client's retry (same snapshot id) lands it once."""


class IcebergRestCatalog(Construct):
    """The catalog's function, its API and the policy its clients need."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        package: Package,
        bucket: s3.IBucket,
        roots: tuple[str, ...],
        key_arn: str | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function: lambda_.Function = function(
            self,
            "iceberg_rest",
            package,
            "Iceberg REST catalog: engines' commits as castable commits",
            TIMEOUT,
            2048,
            construct="IcebergRest",
        )
        self.function.add_environment("CASTABLE_WAREHOUSE", f"s3://{bucket.bucket_name}")
        self.function.add_environment("CASTABLE_NAMESPACES", ",".join(r.rstrip("/") for r in roots))
        grant_tables(self.function, bucket, list(roots), key_arn=key_arn)
        access_logs = logs.LogGroup(self, "AccessLogs", retention=logs.RetentionDays.ONE_MONTH)
        self.api = apigw.LambdaRestApi(
            self,
            "Api",
            handler=self.function,
            proxy=True,
            description="castable: the Iceberg REST catalog of the deployment's tables (IAM authorization)",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            binary_media_types=["*/*"],  # bodies pass as bytes; large answers go back gzip-compressed
            cloud_watch_role=False,
            default_method_options=apigw.MethodOptions(authorization_type=apigw.AuthorizationType.IAM),
            deploy_options=apigw.StageOptions(
                stage_name=STAGE,
                tracing_enabled=True,
                metrics_enabled=True,
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
            ),
        )
        self.clients = iam.ManagedPolicy(
            self,
            "Clients",
            description="castable: call the deployment's Iceberg REST catalog (execute-api:Invoke)",
            statements=[
                iam.PolicyStatement(
                    actions=["execute-api:Invoke"], resources=[self.api.arn_for_execute_api(stage=STAGE)]
                )
            ],
        )
        CfnOutput(scope, "IcebergCatalogUri", value=self.api.url_for_path("/").rstrip("/"))
        CfnOutput(scope, "IcebergCatalogClientsPolicyArn", value=self.clients.managed_policy_arn)
