"""Deployment: the Lambda functions, workflows and stacks at scale, against their limits."""
