# A custom EMR Serverless image for the castable ingest job: EMR 7.x ships Spark 3.5 on
# Amazon Linux 2023 with Python 3.9, and castable needs Python 3.11+.
#
#   docker build -f jobs/emr.Dockerfile -t castable-emr:7.5.0 .
#   (push to ECR, set "emr_image": "<ECR image URI>" in castable.json, then: npx aws-cdk@2.1148.1 deploy)
ARG EMR_RELEASE=emr-7.5.0
FROM public.ecr.aws/emr-serverless/spark/${EMR_RELEASE}:latest
USER root
RUN dnf install -y python3.11 python3.11-pip && dnf clean all
COPY . /opt/castable
# pandas: PySpark 3.5 requires it for mapInArrow; pyspark itself comes from the image.
RUN python3.11 -m pip install --no-cache-dir /opt/castable "pandas<3" && rm -rf /opt/castable
ENV PYSPARK_PYTHON=/usr/bin/python3.11
USER hadoop:hadoop
