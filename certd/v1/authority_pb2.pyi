from certd.v1 import ledger_pb2 as _ledger_pb2
from certd.v1 import tasks_pb2 as _tasks_pb2
from certd.v1 import verifier_pb2 as _verifier_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CertifyRequest(_message.Message):
    __slots__ = ("task", "label", "witness")
    TASK_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    WITNESS_FIELD_NUMBER: _ClassVar[int]
    task: _tasks_pb2.Task
    label: _tasks_pb2.Label
    witness: str
    def __init__(self, task: _Optional[_Union[_tasks_pb2.Task, _Mapping]] = ..., label: _Optional[_Union[_tasks_pb2.Label, _Mapping]] = ..., witness: _Optional[str] = ...) -> None: ...

class Certificate(_message.Message):
    __slots__ = ("envelope", "certificate_id", "ledger_index", "inclusion", "label", "witness")
    ENVELOPE_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATE_ID_FIELD_NUMBER: _ClassVar[int]
    LEDGER_INDEX_FIELD_NUMBER: _ClassVar[int]
    INCLUSION_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    WITNESS_FIELD_NUMBER: _ClassVar[int]
    envelope: bytes
    certificate_id: str
    ledger_index: int
    inclusion: _ledger_pb2.InclusionProof
    label: _tasks_pb2.Label
    witness: str
    def __init__(self, envelope: _Optional[bytes] = ..., certificate_id: _Optional[str] = ..., ledger_index: _Optional[int] = ..., inclusion: _Optional[_Union[_ledger_pb2.InclusionProof, _Mapping]] = ..., label: _Optional[_Union[_tasks_pb2.Label, _Mapping]] = ..., witness: _Optional[str] = ...) -> None: ...

class Refusal(_message.Message):
    __slots__ = ("reason", "detail", "verdict")
    REASON_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    reason: str
    detail: str
    verdict: _verifier_pb2.Verdict
    def __init__(self, reason: _Optional[str] = ..., detail: _Optional[str] = ..., verdict: _Optional[_Union[_verifier_pb2.Verdict, _Mapping]] = ...) -> None: ...

class CertifyResponse(_message.Message):
    __slots__ = ("certificate", "existing")
    CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    EXISTING_FIELD_NUMBER: _ClassVar[int]
    certificate: Certificate
    existing: bool
    def __init__(self, certificate: _Optional[_Union[Certificate, _Mapping]] = ..., existing: _Optional[bool] = ...) -> None: ...

class CertifyBatchRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[CertifyRequest]
    def __init__(self, items: _Optional[_Iterable[_Union[CertifyRequest, _Mapping]]] = ...) -> None: ...

class CertifyResult(_message.Message):
    __slots__ = ("certificate", "refusal", "existing")
    CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    REFUSAL_FIELD_NUMBER: _ClassVar[int]
    EXISTING_FIELD_NUMBER: _ClassVar[int]
    certificate: Certificate
    refusal: Refusal
    existing: bool
    def __init__(self, certificate: _Optional[_Union[Certificate, _Mapping]] = ..., refusal: _Optional[_Union[Refusal, _Mapping]] = ..., existing: _Optional[bool] = ...) -> None: ...

class CertifyBatchResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CertifyResult]
    def __init__(self, results: _Optional[_Iterable[_Union[CertifyResult, _Mapping]]] = ...) -> None: ...

class GetCertificateRequest(_message.Message):
    __slots__ = ("certificate_id", "ledger_index")
    CERTIFICATE_ID_FIELD_NUMBER: _ClassVar[int]
    LEDGER_INDEX_FIELD_NUMBER: _ClassVar[int]
    certificate_id: str
    ledger_index: int
    def __init__(self, certificate_id: _Optional[str] = ..., ledger_index: _Optional[int] = ...) -> None: ...

class GetForkTreeRequest(_message.Message):
    __slots__ = ("task", "kappa", "page_size", "page_token")
    TASK_FIELD_NUMBER: _ClassVar[int]
    KAPPA_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    task: _tasks_pb2.Task
    kappa: str
    page_size: int
    page_token: str
    def __init__(self, task: _Optional[_Union[_tasks_pb2.Task, _Mapping]] = ..., kappa: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ForkTree(_message.Message):
    __slots__ = ("task_digest", "kappa", "certificates", "next_page_token")
    TASK_DIGEST_FIELD_NUMBER: _ClassVar[int]
    KAPPA_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    task_digest: str
    kappa: str
    certificates: _containers.RepeatedCompositeFieldContainer[Certificate]
    next_page_token: str
    def __init__(self, task_digest: _Optional[str] = ..., kappa: _Optional[str] = ..., certificates: _Optional[_Iterable[_Union[Certificate, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class EnumerateFamiliesRequest(_message.Message):
    __slots__ = ("task",)
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: _tasks_pb2.Task
    def __init__(self, task: _Optional[_Union[_tasks_pb2.Task, _Mapping]] = ...) -> None: ...

class FeasibleLabel(_message.Message):
    __slots__ = ("label", "witness")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    WITNESS_FIELD_NUMBER: _ClassVar[int]
    label: _tasks_pb2.Label
    witness: str
    def __init__(self, label: _Optional[_Union[_tasks_pb2.Label, _Mapping]] = ..., witness: _Optional[str] = ...) -> None: ...

class FamilyGroup(_message.Message):
    __slots__ = ("label_indexes",)
    LABEL_INDEXES_FIELD_NUMBER: _ClassVar[int]
    label_indexes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, label_indexes: _Optional[_Iterable[int]] = ...) -> None: ...

class EnumerateFamiliesResponse(_message.Message):
    __slots__ = ("kappa", "labels", "families", "complete", "certifiable_families")
    KAPPA_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    FAMILIES_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    CERTIFIABLE_FAMILIES_FIELD_NUMBER: _ClassVar[int]
    kappa: str
    labels: _containers.RepeatedCompositeFieldContainer[FeasibleLabel]
    families: _containers.RepeatedCompositeFieldContainer[FamilyGroup]
    complete: bool
    certifiable_families: int
    def __init__(self, kappa: _Optional[str] = ..., labels: _Optional[_Iterable[_Union[FeasibleLabel, _Mapping]]] = ..., families: _Optional[_Iterable[_Union[FamilyGroup, _Mapping]]] = ..., complete: _Optional[bool] = ..., certifiable_families: _Optional[int] = ...) -> None: ...

class TaskSet(_message.Message):
    __slots__ = ("name", "tasks", "k", "prompts", "tolerance_best_at_k", "tolerance_pass_at_1", "min_improvement", "route_kappa", "route_field")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    TOLERANCE_BEST_AT_K_FIELD_NUMBER: _ClassVar[int]
    TOLERANCE_PASS_AT_1_FIELD_NUMBER: _ClassVar[int]
    MIN_IMPROVEMENT_FIELD_NUMBER: _ClassVar[int]
    ROUTE_KAPPA_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_FIELD_NUMBER: _ClassVar[int]
    name: str
    tasks: _containers.RepeatedCompositeFieldContainer[_tasks_pb2.Task]
    k: int
    prompts: int
    tolerance_best_at_k: float
    tolerance_pass_at_1: float
    min_improvement: float
    route_kappa: str
    route_field: str
    def __init__(self, name: _Optional[str] = ..., tasks: _Optional[_Iterable[_Union[_tasks_pb2.Task, _Mapping]]] = ..., k: _Optional[int] = ..., prompts: _Optional[int] = ..., tolerance_best_at_k: _Optional[float] = ..., tolerance_pass_at_1: _Optional[float] = ..., min_improvement: _Optional[float] = ..., route_kappa: _Optional[str] = ..., route_field: _Optional[str] = ...) -> None: ...

class RegisterTaskSetRequest(_message.Message):
    __slots__ = ("task_set",)
    TASK_SET_FIELD_NUMBER: _ClassVar[int]
    task_set: TaskSet
    def __init__(self, task_set: _Optional[_Union[TaskSet, _Mapping]] = ...) -> None: ...

class RegisterTaskSetResponse(_message.Message):
    __slots__ = ("task_set_digest", "existing")
    TASK_SET_DIGEST_FIELD_NUMBER: _ClassVar[int]
    EXISTING_FIELD_NUMBER: _ClassVar[int]
    task_set_digest: str
    existing: bool
    def __init__(self, task_set_digest: _Optional[str] = ..., existing: _Optional[bool] = ...) -> None: ...

class BeginAcceptanceRequest(_message.Message):
    __slots__ = ("run", "checkpoint", "checkpoint_digest", "target")
    RUN_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    run: str
    checkpoint: str
    checkpoint_digest: str
    target: str
    def __init__(self, run: _Optional[str] = ..., checkpoint: _Optional[str] = ..., checkpoint_digest: _Optional[str] = ..., target: _Optional[str] = ...) -> None: ...

class EvaluationPrompts(_message.Message):
    __slots__ = ("task_set", "k", "prompts")
    TASK_SET_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    task_set: str
    k: int
    prompts: _containers.RepeatedCompositeFieldContainer[_tasks_pb2.Task]
    def __init__(self, task_set: _Optional[str] = ..., k: _Optional[int] = ..., prompts: _Optional[_Iterable[_Union[_tasks_pb2.Task, _Mapping]]] = ...) -> None: ...

class AcceptanceChallenge(_message.Message):
    __slots__ = ("evaluation_id", "seed", "predecessor", "sets")
    EVALUATION_ID_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    PREDECESSOR_FIELD_NUMBER: _ClassVar[int]
    SETS_FIELD_NUMBER: _ClassVar[int]
    evaluation_id: str
    seed: int
    predecessor: str
    sets: _containers.RepeatedCompositeFieldContainer[EvaluationPrompts]
    def __init__(self, evaluation_id: _Optional[str] = ..., seed: _Optional[int] = ..., predecessor: _Optional[str] = ..., sets: _Optional[_Iterable[_Union[EvaluationPrompts, _Mapping]]] = ...) -> None: ...

class PromptSamples(_message.Message):
    __slots__ = ("responses",)
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    responses: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, responses: _Optional[_Iterable[str]] = ...) -> None: ...

class TaskSetSamples(_message.Message):
    __slots__ = ("task_set", "prompts")
    TASK_SET_FIELD_NUMBER: _ClassVar[int]
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    task_set: str
    prompts: _containers.RepeatedCompositeFieldContainer[PromptSamples]
    def __init__(self, task_set: _Optional[str] = ..., prompts: _Optional[_Iterable[_Union[PromptSamples, _Mapping]]] = ...) -> None: ...

class AcceptRequest(_message.Message):
    __slots__ = ("evaluation_id", "checkpoint_digest", "evaluation")
    EVALUATION_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    EVALUATION_FIELD_NUMBER: _ClassVar[int]
    evaluation_id: str
    checkpoint_digest: str
    evaluation: _containers.RepeatedCompositeFieldContainer[TaskSetSamples]
    def __init__(self, evaluation_id: _Optional[str] = ..., checkpoint_digest: _Optional[str] = ..., evaluation: _Optional[_Iterable[_Union[TaskSetSamples, _Mapping]]] = ...) -> None: ...

class Interval(_message.Message):
    __slots__ = ("estimate", "low", "high", "level")
    ESTIMATE_FIELD_NUMBER: _ClassVar[int]
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    estimate: float
    low: float
    high: float
    level: float
    def __init__(self, estimate: _Optional[float] = ..., low: _Optional[float] = ..., high: _Optional[float] = ..., level: _Optional[float] = ...) -> None: ...

class CapabilityFigures(_message.Message):
    __slots__ = ("task_set", "k", "prompts", "best_at_k", "pass_at_1", "all_correct", "mixed", "all_wrong", "routes", "families", "has_previous", "best_at_k_change", "pass_at_1_change", "ser", "within_noise")
    class RoutesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class FamiliesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    TASK_SET_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    BEST_AT_K_FIELD_NUMBER: _ClassVar[int]
    PASS_AT_1_FIELD_NUMBER: _ClassVar[int]
    ALL_CORRECT_FIELD_NUMBER: _ClassVar[int]
    MIXED_FIELD_NUMBER: _ClassVar[int]
    ALL_WRONG_FIELD_NUMBER: _ClassVar[int]
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    FAMILIES_FIELD_NUMBER: _ClassVar[int]
    HAS_PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    BEST_AT_K_CHANGE_FIELD_NUMBER: _ClassVar[int]
    PASS_AT_1_CHANGE_FIELD_NUMBER: _ClassVar[int]
    SER_FIELD_NUMBER: _ClassVar[int]
    WITHIN_NOISE_FIELD_NUMBER: _ClassVar[int]
    task_set: str
    k: int
    prompts: int
    best_at_k: float
    pass_at_1: float
    all_correct: float
    mixed: float
    all_wrong: float
    routes: _containers.ScalarMap[str, float]
    families: _containers.ScalarMap[str, float]
    has_previous: bool
    best_at_k_change: Interval
    pass_at_1_change: Interval
    ser: Interval
    within_noise: bool
    def __init__(self, task_set: _Optional[str] = ..., k: _Optional[int] = ..., prompts: _Optional[int] = ..., best_at_k: _Optional[float] = ..., pass_at_1: _Optional[float] = ..., all_correct: _Optional[float] = ..., mixed: _Optional[float] = ..., all_wrong: _Optional[float] = ..., routes: _Optional[_Mapping[str, float]] = ..., families: _Optional[_Mapping[str, float]] = ..., has_previous: _Optional[bool] = ..., best_at_k_change: _Optional[_Union[Interval, _Mapping]] = ..., pass_at_1_change: _Optional[_Union[Interval, _Mapping]] = ..., ser: _Optional[_Union[Interval, _Mapping]] = ..., within_noise: _Optional[bool] = ...) -> None: ...

class CapabilityDrop(_message.Message):
    __slots__ = ("task_set", "metric", "previous", "now", "drop", "interval", "tolerance", "against")
    TASK_SET_FIELD_NUMBER: _ClassVar[int]
    METRIC_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    DROP_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    TOLERANCE_FIELD_NUMBER: _ClassVar[int]
    AGAINST_FIELD_NUMBER: _ClassVar[int]
    task_set: str
    metric: str
    previous: float
    now: float
    drop: float
    interval: Interval
    tolerance: float
    against: str
    def __init__(self, task_set: _Optional[str] = ..., metric: _Optional[str] = ..., previous: _Optional[float] = ..., now: _Optional[float] = ..., drop: _Optional[float] = ..., interval: _Optional[_Union[Interval, _Mapping]] = ..., tolerance: _Optional[float] = ..., against: _Optional[str] = ...) -> None: ...

class AcceptanceRefusal(_message.Message):
    __slots__ = ("reason", "detail", "drops", "record")
    REASON_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    DROPS_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    reason: str
    detail: str
    drops: _containers.RepeatedCompositeFieldContainer[CapabilityDrop]
    record: AcceptanceCertificate
    def __init__(self, reason: _Optional[str] = ..., detail: _Optional[str] = ..., drops: _Optional[_Iterable[_Union[CapabilityDrop, _Mapping]]] = ..., record: _Optional[_Union[AcceptanceCertificate, _Mapping]] = ...) -> None: ...

class AcceptanceCertificate(_message.Message):
    __slots__ = ("envelope", "certificate_id", "ledger_index", "inclusion")
    ENVELOPE_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATE_ID_FIELD_NUMBER: _ClassVar[int]
    LEDGER_INDEX_FIELD_NUMBER: _ClassVar[int]
    INCLUSION_FIELD_NUMBER: _ClassVar[int]
    envelope: bytes
    certificate_id: str
    ledger_index: int
    inclusion: _ledger_pb2.InclusionProof
    def __init__(self, envelope: _Optional[bytes] = ..., certificate_id: _Optional[str] = ..., ledger_index: _Optional[int] = ..., inclusion: _Optional[_Union[_ledger_pb2.InclusionProof, _Mapping]] = ...) -> None: ...

class AcceptResponse(_message.Message):
    __slots__ = ("accepted", "certificate", "refusal", "figures")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    REFUSAL_FIELD_NUMBER: _ClassVar[int]
    FIGURES_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    certificate: AcceptanceCertificate
    refusal: AcceptanceRefusal
    figures: _containers.RepeatedCompositeFieldContainer[CapabilityFigures]
    def __init__(self, accepted: _Optional[bool] = ..., certificate: _Optional[_Union[AcceptanceCertificate, _Mapping]] = ..., refusal: _Optional[_Union[AcceptanceRefusal, _Mapping]] = ..., figures: _Optional[_Iterable[_Union[CapabilityFigures, _Mapping]]] = ...) -> None: ...

class ListAcceptancesRequest(_message.Message):
    __slots__ = ("run", "page_size", "page_token")
    RUN_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    run: str
    page_size: int
    page_token: str
    def __init__(self, run: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class AcceptanceDecision(_message.Message):
    __slots__ = ("run", "checkpoint", "checkpoint_digest", "target", "accepted", "certificate", "refusal", "figures")
    RUN_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    REFUSAL_FIELD_NUMBER: _ClassVar[int]
    FIGURES_FIELD_NUMBER: _ClassVar[int]
    run: str
    checkpoint: str
    checkpoint_digest: str
    target: str
    accepted: bool
    certificate: AcceptanceCertificate
    refusal: AcceptanceRefusal
    figures: _containers.RepeatedCompositeFieldContainer[CapabilityFigures]
    def __init__(self, run: _Optional[str] = ..., checkpoint: _Optional[str] = ..., checkpoint_digest: _Optional[str] = ..., target: _Optional[str] = ..., accepted: _Optional[bool] = ..., certificate: _Optional[_Union[AcceptanceCertificate, _Mapping]] = ..., refusal: _Optional[_Union[AcceptanceRefusal, _Mapping]] = ..., figures: _Optional[_Iterable[_Union[CapabilityFigures, _Mapping]]] = ...) -> None: ...

class ListAcceptancesResponse(_message.Message):
    __slots__ = ("decisions", "next_page_token")
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    decisions: _containers.RepeatedCompositeFieldContainer[AcceptanceDecision]
    next_page_token: str
    def __init__(self, decisions: _Optional[_Iterable[_Union[AcceptanceDecision, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...
