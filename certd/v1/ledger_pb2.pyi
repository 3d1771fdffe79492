from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SignedCheckpoint(_message.Message):
    __slots__ = ("note", "origin", "size", "root_hash")
    NOTE_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    ROOT_HASH_FIELD_NUMBER: _ClassVar[int]
    note: str
    origin: str
    size: int
    root_hash: bytes
    def __init__(self, note: _Optional[str] = ..., origin: _Optional[str] = ..., size: _Optional[int] = ..., root_hash: _Optional[bytes] = ...) -> None: ...

class InclusionProof(_message.Message):
    __slots__ = ("leaf_index", "tree_size", "hashes", "leaf_hash", "checkpoint")
    LEAF_INDEX_FIELD_NUMBER: _ClassVar[int]
    TREE_SIZE_FIELD_NUMBER: _ClassVar[int]
    HASHES_FIELD_NUMBER: _ClassVar[int]
    LEAF_HASH_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    leaf_index: int
    tree_size: int
    hashes: _containers.RepeatedScalarFieldContainer[bytes]
    leaf_hash: bytes
    checkpoint: SignedCheckpoint
    def __init__(self, leaf_index: _Optional[int] = ..., tree_size: _Optional[int] = ..., hashes: _Optional[_Iterable[bytes]] = ..., leaf_hash: _Optional[bytes] = ..., checkpoint: _Optional[_Union[SignedCheckpoint, _Mapping]] = ...) -> None: ...

class ConsistencyProof(_message.Message):
    __slots__ = ("first_size", "second_size", "hashes")
    FIRST_SIZE_FIELD_NUMBER: _ClassVar[int]
    SECOND_SIZE_FIELD_NUMBER: _ClassVar[int]
    HASHES_FIELD_NUMBER: _ClassVar[int]
    first_size: int
    second_size: int
    hashes: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, first_size: _Optional[int] = ..., second_size: _Optional[int] = ..., hashes: _Optional[_Iterable[bytes]] = ...) -> None: ...

class GetCheckpointRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetEntriesRequest(_message.Message):
    __slots__ = ("start", "end")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    start: int
    end: int
    def __init__(self, start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class GetEntriesResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, entries: _Optional[_Iterable[bytes]] = ...) -> None: ...

class GetInclusionProofRequest(_message.Message):
    __slots__ = ("leaf_index", "tree_size")
    LEAF_INDEX_FIELD_NUMBER: _ClassVar[int]
    TREE_SIZE_FIELD_NUMBER: _ClassVar[int]
    leaf_index: int
    tree_size: int
    def __init__(self, leaf_index: _Optional[int] = ..., tree_size: _Optional[int] = ...) -> None: ...

class GetConsistencyProofRequest(_message.Message):
    __slots__ = ("first_size", "second_size")
    FIRST_SIZE_FIELD_NUMBER: _ClassVar[int]
    SECOND_SIZE_FIELD_NUMBER: _ClassVar[int]
    first_size: int
    second_size: int
    def __init__(self, first_size: _Optional[int] = ..., second_size: _Optional[int] = ...) -> None: ...

class GetKeyRotationsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class KeyRotation(_message.Message):
    __slots__ = ("ledger_index", "entry", "inclusion")
    LEDGER_INDEX_FIELD_NUMBER: _ClassVar[int]
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    INCLUSION_FIELD_NUMBER: _ClassVar[int]
    ledger_index: int
    entry: bytes
    inclusion: InclusionProof
    def __init__(self, ledger_index: _Optional[int] = ..., entry: _Optional[bytes] = ..., inclusion: _Optional[_Union[InclusionProof, _Mapping]] = ...) -> None: ...

class GetKeyRotationsResponse(_message.Message):
    __slots__ = ("rotations",)
    ROTATIONS_FIELD_NUMBER: _ClassVar[int]
    rotations: _containers.RepeatedCompositeFieldContainer[KeyRotation]
    def __init__(self, rotations: _Optional[_Iterable[_Union[KeyRotation, _Mapping]]] = ...) -> None: ...
