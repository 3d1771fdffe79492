from certd.v1 import ledger_pb2 as _ledger_pb2
from certd.v1 import tasks_pb2 as _tasks_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReceiptPath(_message.Message):
    __slots__ = ("index", "batch_size", "hashes", "receipt_seq")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    HASHES_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_SEQ_FIELD_NUMBER: _ClassVar[int]
    index: int
    batch_size: int
    hashes: _containers.RepeatedScalarFieldContainer[bytes]
    receipt_seq: int
    def __init__(self, index: _Optional[int] = ..., batch_size: _Optional[int] = ..., hashes: _Optional[_Iterable[bytes]] = ..., receipt_seq: _Optional[int] = ...) -> None: ...

class Verdict(_message.Message):
    __slots__ = ("id", "status", "reward", "family", "initiated", "detail", "verifier", "elapsed_ms", "answer", "digest", "receipt_path", "labels")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    INITIATED_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_PATH_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    id: str
    status: _tasks_pb2.VerdictStatus
    reward: float
    family: _tasks_pb2.Label
    initiated: _tasks_pb2.Label
    detail: str
    verifier: str
    elapsed_ms: float
    answer: str
    digest: bytes
    receipt_path: ReceiptPath
    labels: _containers.RepeatedCompositeFieldContainer[_tasks_pb2.Label]
    def __init__(self, id: _Optional[str] = ..., status: _Optional[_Union[_tasks_pb2.VerdictStatus, str]] = ..., reward: _Optional[float] = ..., family: _Optional[_Union[_tasks_pb2.Label, _Mapping]] = ..., initiated: _Optional[_Union[_tasks_pb2.Label, _Mapping]] = ..., detail: _Optional[str] = ..., verifier: _Optional[str] = ..., elapsed_ms: _Optional[float] = ..., answer: _Optional[str] = ..., digest: _Optional[bytes] = ..., receipt_path: _Optional[_Union[ReceiptPath, _Mapping]] = ..., labels: _Optional[_Iterable[_Union[_tasks_pb2.Label, _Mapping]]] = ...) -> None: ...

class Receipt(_message.Message):
    __slots__ = ("envelope", "batch_root", "batch_size", "inclusion", "receipt_seq")
    ENVELOPE_FIELD_NUMBER: _ClassVar[int]
    BATCH_ROOT_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    INCLUSION_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_SEQ_FIELD_NUMBER: _ClassVar[int]
    envelope: bytes
    batch_root: bytes
    batch_size: int
    inclusion: _ledger_pb2.InclusionProof
    receipt_seq: int
    def __init__(self, envelope: _Optional[bytes] = ..., batch_root: _Optional[bytes] = ..., batch_size: _Optional[int] = ..., inclusion: _Optional[_Union[_ledger_pb2.InclusionProof, _Mapping]] = ..., receipt_seq: _Optional[int] = ...) -> None: ...

class VerifyRequest(_message.Message):
    __slots__ = ("id", "task", "response")
    ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    id: str
    task: _tasks_pb2.Task
    response: str
    def __init__(self, id: _Optional[str] = ..., task: _Optional[_Union[_tasks_pb2.Task, _Mapping]] = ..., response: _Optional[str] = ...) -> None: ...

class VerifyResponse(_message.Message):
    __slots__ = ("verdict", "receipt")
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    verdict: Verdict
    receipt: Receipt
    def __init__(self, verdict: _Optional[_Union[Verdict, _Mapping]] = ..., receipt: _Optional[_Union[Receipt, _Mapping]] = ...) -> None: ...

class VerifyBatchRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[VerifyRequest]
    def __init__(self, items: _Optional[_Iterable[_Union[VerifyRequest, _Mapping]]] = ...) -> None: ...

class VerifyBatchResponse(_message.Message):
    __slots__ = ("verdicts", "receipt")
    VERDICTS_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    verdicts: _containers.RepeatedCompositeFieldContainer[Verdict]
    receipt: Receipt
    def __init__(self, verdicts: _Optional[_Iterable[_Union[Verdict, _Mapping]]] = ..., receipt: _Optional[_Union[Receipt, _Mapping]] = ...) -> None: ...

class VerifyStreamResponse(_message.Message):
    __slots__ = ("verdict", "receipt")
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    verdict: Verdict
    receipt: Receipt
    def __init__(self, verdict: _Optional[_Union[Verdict, _Mapping]] = ..., receipt: _Optional[_Union[Receipt, _Mapping]] = ...) -> None: ...
