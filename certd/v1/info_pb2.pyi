from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ServerInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DomainInfo(_message.Message):
    __slots__ = ("name", "verifier", "default_kappa", "kappas", "status", "limits", "isolation")
    class LimitsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_KAPPA_FIELD_NUMBER: _ClassVar[int]
    KAPPAS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_FIELD_NUMBER: _ClassVar[int]
    name: str
    verifier: str
    default_kappa: str
    kappas: _containers.RepeatedScalarFieldContainer[str]
    status: str
    limits: _containers.ScalarMap[str, float]
    isolation: str
    def __init__(self, name: _Optional[str] = ..., verifier: _Optional[str] = ..., default_kappa: _Optional[str] = ..., kappas: _Optional[_Iterable[str]] = ..., status: _Optional[str] = ..., limits: _Optional[_Mapping[str, float]] = ..., isolation: _Optional[str] = ...) -> None: ...

class LogInfo(_message.Message):
    __slots__ = ("origin", "key_name", "key_id", "vkey", "previous_key_ids", "store", "size")
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    KEY_NAME_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    VKEY_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_KEY_IDS_FIELD_NUMBER: _ClassVar[int]
    STORE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    origin: str
    key_name: str
    key_id: str
    vkey: str
    previous_key_ids: _containers.RepeatedScalarFieldContainer[str]
    store: str
    size: int
    def __init__(self, origin: _Optional[str] = ..., key_name: _Optional[str] = ..., key_id: _Optional[str] = ..., vkey: _Optional[str] = ..., previous_key_ids: _Optional[_Iterable[str]] = ..., store: _Optional[str] = ..., size: _Optional[int] = ...) -> None: ...

class ServerInfoResponse(_message.Message):
    __slots__ = ("server_version", "services", "domains", "log", "limits", "authenticated", "tls", "principal", "roles")
    class LimitsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    SERVICES_FIELD_NUMBER: _ClassVar[int]
    DOMAINS_FIELD_NUMBER: _ClassVar[int]
    LOG_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    AUTHENTICATED_FIELD_NUMBER: _ClassVar[int]
    TLS_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    server_version: str
    services: _containers.RepeatedScalarFieldContainer[str]
    domains: _containers.RepeatedCompositeFieldContainer[DomainInfo]
    log: LogInfo
    limits: _containers.ScalarMap[str, float]
    authenticated: bool
    tls: bool
    principal: str
    roles: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, server_version: _Optional[str] = ..., services: _Optional[_Iterable[str]] = ..., domains: _Optional[_Iterable[_Union[DomainInfo, _Mapping]]] = ..., log: _Optional[_Union[LogInfo, _Mapping]] = ..., limits: _Optional[_Mapping[str, float]] = ..., authenticated: _Optional[bool] = ..., tls: _Optional[bool] = ..., principal: _Optional[str] = ..., roles: _Optional[_Iterable[str]] = ...) -> None: ...
