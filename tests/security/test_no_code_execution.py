"""Model text is never executed: payloads that eval or sympy.parse_expr would run stay inert."""

from __future__ import annotations

from pathlib import Path

import pytest

from certd.v1 import tasks_pb2
from forkgate import CertdClient, CertificationRefusedError

TASK = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}


@pytest.mark.parametrize(
    "payload",
    [
        "__import__('os').system('touch {mark}')",
        "open('{mark}', 'w').write('x')",
        "exec(\"open('{mark}','w')\")",
        "(lambda: __import__('pathlib').Path('{mark}').touch())()",
        "25-5+(83 if __import__('os').system('touch {mark}') else 83)",
        "Symbol('x').__class__.__init__.__globals__['__builtins__']['open']('{mark}','w')",
    ],
)
def test_payloads_do_not_run(address: str, tmp_path: Path, payload: str) -> None:
    mark = tmp_path / "pwned"
    text = payload.format(mark=mark)
    with CertdClient(address) as c:
        for response in (text, f"<answer>{text}</answer>", f"<think>{text}</think>83"):
            v = c.verify(TASK, response)
            assert v.status != tasks_pb2.CORRECT
        with pytest.raises(CertificationRefusedError) as e:
            c.certify(TASK, "25,-", text)
        assert e.value.reason == "WITNESS_NOT_CORRECT"
    assert not mark.exists(), "a payload ran"
