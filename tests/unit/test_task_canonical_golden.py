"""The task digest is byte-identical through the domain registry (certd.taskspec).

The canonical JSON and digests below were recorded from the ``if domain ==`` chain of
``payloads.task_json`` before the registry replaced it; a signed task's digest must never move.
"""

from __future__ import annotations

import pytest

from certd.payloads import task_digests, task_json
from certd.signing.intoto import canonical_json
from certd.task_object import parse_task_object
from certd.taskspec import domain_names

GOLDEN = [
    (
        {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}},
        '{"domain":"countdown","numbers":[25,5,4,3],"rules":{"exactly_once":true},"target":83}',
        ("c8570886e64fbf5f553b57921f6a92fc66a3fe3bca2afa6561d34ee53ace2c9d",),
    ),
    (
        {
            "domain": "countdown",
            "task": {"numbers": [1, 2, 2], "target": 4, "rules": {"at_most_once": True}},
        },
        '{"domain":"countdown","numbers":[1,2,2],"rules":{"exactly_once":false},"target":4}',
        ("47e996b994d513c854f45436ecf680442e61cffa41341a3e3fc98f5d6f879960",),
    ),
    (
        {"domain": "math", "task": {"gold": "\\frac{1}{2}"}},
        '{"domain":"math","gold":"\\\\frac{1}{2}"}',
        ("27c2d2c9772fc046fb7b9b865571b84f6323ef9b2c49aef8360393f457622cf7",),
    ),
    (
        {"domain": "math", "task": {"gold": "3.14159", "precision_digits": 4}},
        '{"domain":"math","gold":"3.14159","precision_digits":4}',
        ("f3e58820a1064aef5c9f7ba120a99250b4f8816fcd5cedcdaf33e58bcfa17bdd",),
    ),
    (
        {
            "domain": "math",
            "task": {"gold": "5", "question": "Solve  2x - 3 = 7.\u00a0", "precision_digits": 2},
        },
        '{"domain":"math","gold":"5","precision_digits":2,"question":"Solve 2x - 3 = 7.",'
        '"task_identity":2}',
        (
            "5e9839daf09026843a47a7d3eb6e110bf8f4f91e9f8869b82ff3ed38d0fb03c3",
            "e7b38de76da985dbc6358a3d91e9468f367a226af8527b5db74c3e2033589ed1",
        ),
    ),
    (
        {
            "domain": "code",
            "task": {"prompt": "def f(x):\n", "test": "assert f(1) == 2", "entry_point": "f"},
        },
        '{"cases":[],"compare":"exact","domain":"code","entry_point":"f","language":"python",'
        '"prompt":"def f(x):\\n","test":"assert f(1) == 2"}',
        ("3e1ea9e88bea113825e38b45ce86fc19d33782fd191ff4cd1eca851e808a4a88",),
    ),
    (
        {
            "domain": "code",
            "task": {
                "language": "c",
                "cases": [{"stdin": "1 2\n", "stdout": "3\n"}],
                "compare": "float:1e-6",
            },
        },
        '{"cases":[{"stdin":"1 2\\n","stdout":"3\\n"}],"compare":"float:1e-6","domain":"code",'
        '"entry_point":"","language":"c","prompt":"","test":""}',
        ("e519819e16bf08b9b2c45889814356cf4b047ba8f5e78f2ce8c0d5ccf5c0c0ef",),
    ),
    (
        {"domain": "code", "task": {"language": "cpp", "cases": [{"stdin": "é", "stdout": "ü"}]}},
        '{"cases":[{"stdin":"é","stdout":"ü"}],"compare":"exact","domain":"code",'
        '"entry_point":"","language":"cpp","prompt":"","test":""}',
        ("d51b0ec75e95e45dea353dab55382deb818d80af35028e78090396275a79da39",),
    ),
]


@pytest.mark.parametrize(("obj", "canonical", "digests"), GOLDEN)
def test_canonical_json_and_digests_unchanged(
    obj: dict[str, object], canonical: str, digests: tuple[str, ...]
) -> None:
    task = parse_task_object(obj)
    assert canonical_json(task_json(task)).decode() == canonical
    assert task_digests(task) == digests


def test_every_builtin_domain_has_a_golden_sample() -> None:
    assert {obj["domain"] for obj, _, _ in GOLDEN} == set(domain_names())


def test_unknown_and_missing_domains_name_the_registered_ones() -> None:
    with pytest.raises(ValueError, match=r'required \("countdown", "math" or "code"\)'):
        parse_task_object({"task": {}})
    with pytest.raises(ValueError, match="expected countdown, math or code, got 'sql'"):
        parse_task_object({"domain": "sql", "task": {}})
