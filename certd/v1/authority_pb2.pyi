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
    __slots__ = ("task", "kappa")
    TASK_FIELD_NUMBER: _ClassVar[int]
    KAPPA_FIELD_NUMBER: _ClassVar[int]
    task: _tasks_pb2.Task
    kappa: str
    def __init__(self, task: _Optional[_Union[_tasks_pb2.Task, _Mapping]] = ..., kappa: _Optional[str] = ...) -> None: ...

class ForkTree(_message.Message):
    __slots__ = ("task_digest", "kappa", "certificates")
    TASK_DIGEST_FIELD_NUMBER: _ClassVar[int]
    KAPPA_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATES_FIELD_NUMBER: _ClassVar[int]
    task_digest: str
    kappa: str
    certificates: _containers.RepeatedCompositeFieldContainer[Certificate]
    def __init__(self, task_digest: _Optional[str] = ..., kappa: _Optional[str] = ..., certificates: _Optional[_Iterable[_Union[Certificate, _Mapping]]] = ...) -> None: ...

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
