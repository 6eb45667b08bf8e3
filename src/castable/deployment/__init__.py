"""What castable knows of its AWS deployment (infra/stack.py, the handlers in lambdas/): the layout
it gives its bucket (:mod:`~castable.deployment.layout`), the names it gives executions and Glue
tables (:mod:`~castable.deployment.names`), when a table's maintenance schedule
falls due (:mod:`~castable.deployment.schedules`), invoking its functions
(:mod:`~castable.deployment.invocation`) and ingesting the files that land in its bucket
(:mod:`~castable.deployment.ingest`).

One package, so the library below it knows nothing of Lambda, SQS, Step Functions or Glue, and the
handlers stay thin. Import the modules themselves; this ``__init__`` re-exports nothing.
"""
