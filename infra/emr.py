"""The EMR side of the stack: the job role of castable's Spark jobs, an EMR Serverless Spark
application, the ingest job's entry script and packed Python environment (uploaded as assets),
and the ECR repository a custom image is pushed to.

EMR 7.x ships Python 3.9 and castable needs 3.11+: the application's jobs get their Python from
the environment archive (infra/emr_env.py; every job unpacks it as ``./environment``) or from a
custom image (jobs/emr.Dockerfile), whichever the configuration names.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_emrserverless as emrs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as assets

from infra.bundle import ROOT
from infra.parts import object_key_use

ENTRY_POINT = ROOT / "jobs" / "castable_ingest.py"
EMR_ARTIFACTS = "artifacts/"
"""Where jobs may read other artifacts of their own from the table bucket."""
EMR_LOGS = "emr-logs/"
ENVIRONMENT_PYTHON = "./environment/bin/python"
"""The interpreter of the environment archive, where Spark unpacks it (``#environment``)."""
IMAGE_PULL = ["ecr:BatchGetImage", "ecr:DescribeImages", "ecr:GetDownloadUrlForLayer"]
"""What EMR Serverless needs of a repository to run its images (its repository policy)."""


class Emr:
    """The EMR resources, made in the stack's own scope (their logical ids are the stack's)."""

    def __init__(
        self,
        stack: Stack,
        bucket: s3.IBucket,
        commit: lambda_.IFunction,
        *,
        roots: tuple[str, ...],
        release: str,
        architecture: str,
        image: str | None,
        environment: str | None,
        kms_key_arn: str | None,
    ) -> None:
        self.stack = stack
        self.bucket = bucket
        self.job_role = self._job_role(roots, commit, kms_key_arn)
        self.entry_point = assets.Asset(stack, "IngestJobScript", path=str(ENTRY_POINT))
        self.environment = None
        if environment is not None:
            self.environment = assets.Asset(stack, "JobPythonEnvironment", path=environment)
        # Each asset's own object, not the whole asset bucket (which holds every stack's code).
        self.job_role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[
                    a.bucket.arn_for_objects(a.s3_object_key) for a in (self.entry_point, self.environment) if a
                ],
            )
        )
        self.repository = self._repository()
        self.application = self._application(release, architecture, image)

    def _job_role(self, roots: tuple[str, ...], commit: lambda_.IFunction, kms_key_arn: str | None) -> iam.Role:
        """The job role of the Spark jobs: read their inputs and the tables, write data files
        (``tables/*/data/``, and ``databases/*/<member>/data/``) and logs, and commit only through
        the commit function."""
        stack, bucket = self.stack, self.bucket
        here = f"arn:{stack.partition}:"
        role = iam.Role(
            stack,
            "EmrJobRole",
            # Only this account's EMR may assume it (no confused deputy): EMR Serverless for its
            # applications here, EMR on EC2 for its clusters here.
            assumed_by=iam.CompositePrincipal(
                *(
                    iam.ServicePrincipal(
                        f"{service}.amazonaws.com",
                        conditions={
                            "StringEquals": {"aws:SourceAccount": stack.account},
                            "ArnLike": {"aws:SourceArn": f"{here}{service}:{stack.region}:{stack.account}:{what}"},
                        },
                    )
                    for service, what in (("emr-serverless", "/applications/*"), ("elasticmapreduce", "cluster/*"))
                )
            ),
            description="castable Spark jobs: write Parquet under tables/*/data/ and call the commit function",
        )
        readable = [*roots, "landing/", EMR_ARTIFACTS]
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                resources=[
                    bucket.arn_for_objects("tables/*/data/*"),
                    bucket.arn_for_objects("databases/*/*/data/*"),
                    bucket.arn_for_objects(f"{EMR_LOGS}*"),
                ],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[bucket.arn_for_objects(f"{p}*") for p in readable])
        )
        # Without ListBucket a GET of a missing key is 403, not 404: the commit protocol's probe
        # for a newer manifest needs the 404, so listing is granted on exactly these prefixes.
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{p}*" for p in readable]}},
            )
        )
        if kms_key_arn is not None:
            role.add_to_policy(object_key_use(kms_key_arn))
        commit.grant_invoke(role)
        return role

    def _repository(self) -> ecr.Repository:
        """Where ``make emr-image`` pushes a custom image; EMR Serverless applications of this
        account and region (no other) may pull from it."""
        stack = self.stack
        applications = f"arn:{stack.partition}:emr-serverless:{stack.region}:{stack.account}:/applications/*"
        repository = ecr.Repository(
            stack,
            "EmrImages",
            image_scan_on_push=True,
            image_tag_mutability=ecr.TagMutability.IMMUTABLE,
            lifecycle_rules=[ecr.LifecycleRule(max_image_count=10)],
            removal_policy=RemovalPolicy.RETAIN,
        )
        repository.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("emr-serverless.amazonaws.com")],
                actions=IMAGE_PULL,
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {"aws:SourceArn": applications},
                },
            )
        )
        return repository

    def _application(self, release: str, architecture: str, image: str | None) -> emrs.CfnApplication:
        """A Spark application that starts on the first job and stops when idle (no cluster to
        keep); with the environment archive, every job unpacks it and runs on its Python."""
        defaults = None
        if self.environment is not None:
            archive = f"{self.environment.s3_object_url}#environment"
            spark_defaults = {
                "spark.archives": archive,
                "spark.emr-serverless.driverEnv.PYSPARK_PYTHON": ENVIRONMENT_PYTHON,
                "spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON": ENVIRONMENT_PYTHON,
                "spark.executorEnv.PYSPARK_PYTHON": ENVIRONMENT_PYTHON,
            }
            defaults = [
                emrs.CfnApplication.ConfigurationObjectProperty(
                    classification="spark-defaults", properties=spark_defaults
                )
            ]
        return emrs.CfnApplication(
            self.stack,
            "SparkApplication",
            name="castable-spark",
            release_label=release,
            type="Spark",
            architecture=architecture.upper(),
            auto_start_configuration=emrs.CfnApplication.AutoStartConfigurationProperty(enabled=True),
            auto_stop_configuration=emrs.CfnApplication.AutoStopConfigurationProperty(
                enabled=True, idle_timeout_minutes=15
            ),
            maximum_capacity=emrs.CfnApplication.MaximumAllowedResourcesProperty(
                cpu="64 vCPU", memory="256 GB", disk="1000 GB"
            ),
            image_configuration=None
            if image is None
            else emrs.CfnApplication.ImageConfigurationInputProperty(image_uri=image),
            runtime_configuration=defaults,
            monitoring_configuration=emrs.CfnApplication.MonitoringConfigurationProperty(
                s3_monitoring_configuration=emrs.CfnApplication.S3MonitoringConfigurationProperty(
                    log_uri=f"s3://{self.bucket.bucket_name}/{EMR_LOGS}"
                )
            ),
        )

    def outputs(self) -> list[tuple[str, str]]:
        """What a job run needs: the application, its role, the entry script, the archive, the repository."""
        found = [
            ("EmrApplicationId", self.application.attr_application_id),
            ("EmrJobRoleArn", self.job_role.role_arn),
            ("EmrEntryPoint", self.entry_point.s3_object_url),
            ("EmrImageRepositoryUri", self.repository.repository_uri),
        ]
        if self.environment is not None:
            found.append(("EmrEnvironmentArchive", self.environment.s3_object_url))
        return found
