"""AWS Lambda handlers: thin layers over the castable library (one module per function)."""
