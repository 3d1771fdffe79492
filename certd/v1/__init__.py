"""Generated gRPC stubs for the certd v1 wire contract (proto/certd/v1/*.proto).

Regenerate with ``python scripts/gen_protos.py``; do not edit the ``*_pb2*`` files by hand.

Example:
    >>> from certd.v1 import tasks_pb2
    >>> tasks_pb2.Task(countdown=tasks_pb2.CountdownTask(numbers=[25, 5, 4, 3], target=83)).WhichOneof("domain")
    'countdown'
"""
