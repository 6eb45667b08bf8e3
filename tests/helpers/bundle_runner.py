"""Run inside the Lambda bundle alone: ``python3.12 -I -S bundle_runner.py BUNDLE`` reads a JSON
list of {"handler": "lambdas.x.handler", "event": {...}} on stdin, invokes each as the Lambda
runtime would, and prints a JSON list of {"result"} or {"errorType", "errorMessage"}.

Nothing of the test's environment is importable here: only the standard library and BUNDLE.
"""

import importlib
import json
import sys
import time
import traceback

sys.path.insert(0, sys.argv[1])


class Context:
    function_name = "castable-bundle-test"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:castable-bundle-test"
    aws_request_id = "bundle-test"


out = []
for call in json.load(sys.stdin):
    module, name = call["handler"].rsplit(".", 1)
    started = time.perf_counter()
    try:
        handler = getattr(importlib.import_module(module), name)
        imported = time.perf_counter()
        out.append({"result": handler(call["event"], Context()), "import_s": imported - started})
    except Exception as e:
        out.append({"errorType": type(e).__name__, "errorMessage": str(e), "trace": traceback.format_exc()})
print(json.dumps({"calls": out, "numpy_loaded": "numpy" in sys.modules, "path": sys.path}, default=str))
