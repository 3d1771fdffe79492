"""Hypothesis fuzzing of the acceptance RPCs over real gRPC: typed errors, never INTERNAL."""

from __future__ import annotations

import grpc
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from certd.v1 import authority_pb2, tasks_pb2

ALLOWED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.UNIMPLEMENTED,
}
FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
METHODS = {
    "RegisterTaskSet": (
        authority_pb2.RegisterTaskSetRequest,
        authority_pb2.RegisterTaskSetResponse,
    ),
    "BeginAcceptance": (authority_pb2.BeginAcceptanceRequest, authority_pb2.AcceptanceChallenge),
    "Accept": (authority_pb2.AcceptRequest, authority_pb2.AcceptResponse),
    "ListAcceptances": (
        authority_pb2.ListAcceptancesRequest,
        authority_pb2.ListAcceptancesResponse,
    ),
}
TEXT = st.text(max_size=60)
TASK = tasks_pb2.Task(countdown=tasks_pb2.CountdownTask(numbers=[25, 5, 4, 3], target=83))


def _call(ch: grpc.Channel, name: str, req: object) -> tuple[grpc.StatusCode, object]:
    request, reply = METHODS[name]
    fn = ch.unary_unary(
        f"/certd.v1.Authority/{name}",
        request_serializer=request.SerializeToString,
        response_deserializer=reply.FromString,
    )
    try:
        return grpc.StatusCode.OK, fn(req, timeout=30)
    except grpc.RpcError as e:
        return e.code(), None


@FUZZ
@given(raw=st.binary(max_size=300), method=st.sampled_from(sorted(METHODS)))
def test_garbage_bytes_never_crash_an_acceptance_handler(
    address: str, raw: bytes, method: str
) -> None:
    with grpc.insecure_channel(address) as ch:
        call = ch.unary_unary(
            f"/certd.v1.Authority/{method}",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        try:
            call(raw, timeout=30)
            code = grpc.StatusCode.OK
        except grpc.RpcError as e:
            code = e.code()
    if code == grpc.StatusCode.INTERNAL:  # gRPC's own "cannot deserialize", before any handler
        try:
            METHODS[method][0].FromString(raw)
        except DecodeError:
            return
    assert code in ALLOWED


@FUZZ
@given(
    name=TEXT,
    k=st.integers(min_value=0, max_value=2**32 - 1),
    prompts=st.integers(min_value=0, max_value=2**32 - 1),
    tolerance=st.floats(allow_nan=True, allow_infinity=True),
    run=TEXT,
    digest=st.one_of(TEXT, st.just("a" * 64)),
    shape=st.lists(st.lists(TEXT, max_size=4), max_size=3),
    set_name=st.one_of(TEXT, st.just("fuzz-set")),
)
def test_acceptance_flow_fuzz(
    address: str,
    name: str,
    k: int,
    prompts: int,
    tolerance: float,
    run: str,
    digest: str,
    shape: list[list[str]],
    set_name: str,
) -> None:
    with grpc.insecure_channel(address) as ch:
        ts = authority_pb2.TaskSet(
            name=name, tasks=[TASK], k=k, prompts=prompts, tolerance_best_at_k=tolerance
        )
        code, _ = _call(ch, "RegisterTaskSet", authority_pb2.RegisterTaskSetRequest(task_set=ts))
        assert code in ALLOWED
        good = authority_pb2.TaskSet(name="fuzz-set", tasks=[TASK], k=2)
        code, _ = _call(ch, "RegisterTaskSet", authority_pb2.RegisterTaskSetRequest(task_set=good))
        assert code == grpc.StatusCode.OK
        begin = authority_pb2.BeginAcceptanceRequest(
            run=run, checkpoint=name, checkpoint_digest=digest, target="fuzz-set"
        )
        code, challenge = _call(ch, "BeginAcceptance", begin)
        assert code in ALLOWED
        evaluation_id = challenge.evaluation_id if challenge is not None else name  # type: ignore[attr-defined]
        accept = authority_pb2.AcceptRequest(
            evaluation_id=evaluation_id,
            checkpoint_digest=digest,
            evaluation=[
                authority_pb2.TaskSetSamples(
                    task_set=set_name,
                    prompts=[authority_pb2.PromptSamples(responses=r) for r in shape],
                )
            ],
        )
        code, _ = _call(ch, "Accept", accept)
        assert code in ALLOWED
        code, _ = _call(ch, "ListAcceptances", authority_pb2.ListAcceptancesRequest(run=run))
        assert code in ALLOWED
