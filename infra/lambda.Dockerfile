# The castable functions as a container image ("function_package": "image" in castable.json),
# for when the zip bundle nears Lambda's 250 MiB (an image may be 10 GB). It holds exactly what
# the zip bundle holds: infra/bundle.py installs both. The CDK app builds and pushes it on deploy
# (Docker needed there); each function runs its own handler as the image's command.
#
#   docker build -f infra/lambda.Dockerfile --build-arg ARCHITECTURE=x86_64 .
FROM public.ecr.aws/lambda/python:3.12
ARG ARCHITECTURE=x86_64
WORKDIR /build
COPY pyproject.toml README.md ./
COPY infra/bundle.py infra/bundle-constraints.txt infra/
COPY src/castable src/castable
COPY lambdas lambdas
RUN python infra/bundle.py "${LAMBDA_TASK_ROOT}" "${ARCHITECTURE}" && rm -rf /build /root/.cache
WORKDIR ${LAMBDA_TASK_ROOT}
