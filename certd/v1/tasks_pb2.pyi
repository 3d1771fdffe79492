from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class VerdictStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERDICT_STATUS_UNSPECIFIED: _ClassVar[VerdictStatus]
    CORRECT: _ClassVar[VerdictStatus]
    WRONG_ANSWER: _ClassVar[VerdictStatus]
    INVALID_FORMAT: _ClassVar[VerdictStatus]
    RULE_VIOLATION: _ClassVar[VerdictStatus]
    TIME_LIMIT: _ClassVar[VerdictStatus]
    MEMORY_LIMIT: _ClassVar[VerdictStatus]
    RUNTIME_ERROR: _ClassVar[VerdictStatus]
    COMPILE_ERROR: _ClassVar[VerdictStatus]
    UNPARSED: _ClassVar[VerdictStatus]
    INFRA_ERROR: _ClassVar[VerdictStatus]
VERDICT_STATUS_UNSPECIFIED: VerdictStatus
CORRECT: VerdictStatus
WRONG_ANSWER: VerdictStatus
INVALID_FORMAT: VerdictStatus
RULE_VIOLATION: VerdictStatus
TIME_LIMIT: VerdictStatus
MEMORY_LIMIT: VerdictStatus
RUNTIME_ERROR: VerdictStatus
COMPILE_ERROR: VerdictStatus
UNPARSED: VerdictStatus
INFRA_ERROR: VerdictStatus

class CountdownRules(_message.Message):
    __slots__ = ("at_most_once",)
    AT_MOST_ONCE_FIELD_NUMBER: _ClassVar[int]
    at_most_once: bool
    def __init__(self, at_most_once: _Optional[bool] = ...) -> None: ...

class CountdownTask(_message.Message):
    __slots__ = ("numbers", "target", "rules")
    NUMBERS_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    numbers: _containers.RepeatedScalarFieldContainer[int]
    target: int
    rules: CountdownRules
    def __init__(self, numbers: _Optional[_Iterable[int]] = ..., target: _Optional[int] = ..., rules: _Optional[_Union[CountdownRules, _Mapping]] = ...) -> None: ...

class MathTask(_message.Message):
    __slots__ = ("gold", "precision_digits", "question")
    GOLD_FIELD_NUMBER: _ClassVar[int]
    PRECISION_DIGITS_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    gold: str
    precision_digits: int
    question: str
    def __init__(self, gold: _Optional[str] = ..., precision_digits: _Optional[int] = ..., question: _Optional[str] = ...) -> None: ...

class CodeCase(_message.Message):
    __slots__ = ("stdin", "stdout")
    STDIN_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    stdin: str
    stdout: str
    def __init__(self, stdin: _Optional[str] = ..., stdout: _Optional[str] = ...) -> None: ...

class CodeTask(_message.Message):
    __slots__ = ("language", "prompt", "test", "entry_point", "cases", "compare")
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    TEST_FIELD_NUMBER: _ClassVar[int]
    ENTRY_POINT_FIELD_NUMBER: _ClassVar[int]
    CASES_FIELD_NUMBER: _ClassVar[int]
    COMPARE_FIELD_NUMBER: _ClassVar[int]
    language: str
    prompt: str
    test: str
    entry_point: str
    cases: _containers.RepeatedCompositeFieldContainer[CodeCase]
    compare: str
    def __init__(self, language: _Optional[str] = ..., prompt: _Optional[str] = ..., test: _Optional[str] = ..., entry_point: _Optional[str] = ..., cases: _Optional[_Iterable[_Union[CodeCase, _Mapping]]] = ..., compare: _Optional[str] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ("countdown", "math", "code")
    COUNTDOWN_FIELD_NUMBER: _ClassVar[int]
    MATH_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    countdown: CountdownTask
    math: MathTask
    code: CodeTask
    def __init__(self, countdown: _Optional[_Union[CountdownTask, _Mapping]] = ..., math: _Optional[_Union[MathTask, _Mapping]] = ..., code: _Optional[_Union[CodeTask, _Mapping]] = ...) -> None: ...

class Label(_message.Message):
    __slots__ = ("kappa", "value", "fields")
    class FieldsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    KAPPA_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    kappa: str
    value: str
    fields: _containers.ScalarMap[str, str]
    def __init__(self, kappa: _Optional[str] = ..., value: _Optional[str] = ..., fields: _Optional[_Mapping[str, str]] = ...) -> None: ...
