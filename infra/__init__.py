"""The AWS CDK app of castable: one stack with the table bucket, functions and workflows."""
