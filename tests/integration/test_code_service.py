"""The code domain through certd over real gRPC: verify, batch, certify, the pseudo-fork gate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from certd.v1 import tasks_pb2
from forkgate import (
    CertdClient,
    CertificationRefusedError,
    ClientSettings,
    InvalidRequestError,
    VerifyItem,
)

# One server (and one warm sandbox pool) for the module (tests/conftest.py): the tests verify,
# and the one that certifies uses a task of its own.
pytestmark = pytest.mark.shared_certd

HUMANEVAL = {
    "language": "python",
    "prompt": "def add(a, b):\n    '''Add two numbers.'''\n",
    "test": "def check(c):\n    assert c(1, 2) == 3\n    assert c(-1, 1) == 0\n",
    "entry_point": "add",
}
IO = {
    "language": "python",
    "cases": [{"stdin": "2 3\n", "stdout": "5\n"}, {"stdin": "10 -4\n", "stdout": "6\n"}],
    "compare": "whitespace",
}
C_IO = dict(IO, language="c")
CPP_IO = dict(IO, language="cpp")


def code(task: dict[str, object]) -> dict[str, object]:
    return dict(task, domain="code")


def test_verify_batch_mixes_layouts_and_languages(address: str, vkey: str) -> None:
    items = [
        (HUMANEVAL, "    return a + b\n", tasks_pb2.CORRECT),
        (HUMANEVAL, "```python\ndef add(a, b):\n    return a - b\n```", tasks_pb2.WRONG_ANSWER),
        (HUMANEVAL, "    import sys\n    sys.exit(0)\n", tasks_pb2.WRONG_ANSWER),
        (HUMANEVAL, "    return (a +\n", tasks_pb2.COMPILE_ERROR),
        (HUMANEVAL, "    while True: pass\n", tasks_pb2.TIME_LIMIT),
        (IO, "```python\na, b = map(int, input().split())\nprint(a + b)\n```", tasks_pb2.CORRECT),
        (IO, "```python\nprint(5)\n```", tasks_pb2.WRONG_ANSWER),
        (IO, "```python\nraise ValueError('x')\n```", tasks_pb2.RUNTIME_ERROR),
        (
            C_IO,
            '```c\n#include <stdio.h>\nint main(){long a,b;scanf("%ld %ld",&a,&b);'
            'printf("%ld\\n",a+b);return 0;}\n```',
            tasks_pb2.CORRECT,
        ),
        (C_IO, "```c\nint main( {\n```", tasks_pb2.COMPILE_ERROR),
        (
            CPP_IO,
            "```cpp\n#include <iostream>\nint main(){long a,b;std::cin>>a>>b;"
            "std::cout<<a+b<<std::endl;}\n```",
            tasks_pb2.CORRECT,
        ),
    ]
    reqs = [VerifyItem(code(t), r, f"i{n}") for n, (t, r, _) in enumerate(items)]
    with CertdClient(address, trusted_keys=[vkey], settings=ClientSettings(timeout_s=300)) as c:
        verdicts = c.verify_batch(reqs)
    got = [v.status for v in verdicts]
    assert got == [s for _, _, s in items], [(v.status, v.detail) for v in verdicts]
    assert verdicts[0].verifier.startswith("code@") and verdicts[0].reward == 1.0
    assert verdicts[0].kappa == "code.first-call.v1"
    assert [lab.kappa for lab in verdicts[0].pb.labels] == ["code.first-tool.v1"]
    assert "case 1:" in verdicts[6].detail and "pass fraction 0.500" in verdicts[6].detail
    assert verdicts[8].family == "scanf"


def test_bad_code_tasks_are_typed_errors(address: str, vkey: str) -> None:
    with CertdClient(address, trusted_keys=[vkey]) as c:
        with pytest.raises(InvalidRequestError, match="language"):
            c.verify(code({"language": "cobol", "cases": [{"stdin": "", "stdout": ""}]}), "x")
        with pytest.raises(InvalidRequestError, match="compare"):
            c.verify(code(dict(IO, compare="fuzzy")), "x")
        with pytest.raises(InvalidRequestError, match="test"):
            c.verify(code({"language": "python", "entry_point": "f"}), "x")


def test_certify_code_families_and_refuse_a_pseudo_fork(address: str, vkey: str) -> None:
    task = code(
        {
            "language": "python",
            "prompt": "",
            "test": "def check(f):\n    assert f([3, 1, 2]) == 3\n    assert f([5]) == 5\n",
            "entry_point": "top",
        }
    )
    by_sorted = "```python\ndef top(xs):\n    return sorted(xs)[-1]\n```"
    by_max = "```python\ndef top(xs):\n    return max(xs)\n```"
    renamed = "```python\ndef top(values):\n    # same as max\n    return max(values)\n```"
    with CertdClient(address, trusted_keys=[vkey], settings=ClientSettings(timeout_s=120)) as c:
        cert = c.certify(task, "sorted", by_sorted)
        assert cert.label.value == "sorted" and cert.label.kappa == "code.first-call.v1"
        assert c.certify(task, "max", by_max).label.value == "max"
        with pytest.raises(CertificationRefusedError):
            c.certify(task, "max", "```python\ndef top(xs):\n    return min(xs)\n```")
        # Same solution as the certified `max` witness, claimed under another κ's label.
        tool_text = '<tool_call>{"name": "python"}</tool_call>\n' + renamed
        cert = c.certify(task, "python", tool_text, kappa="code.first-tool.v1")
        assert cert.label.kappa == "code.first-tool.v1"
        with pytest.raises(CertificationRefusedError) as info:
            c.certify(
                task,
                "other",
                '<tool_call>{"name": "other"}</tool_call>\n' + renamed,
                kappa="code.first-tool.v1",
            )
        assert info.value.reason == "PSEUDO_FORK"


def test_forkgate_verify_batch_reads_code_lines(address: str, vkey: str, tmp_path: Path) -> None:
    lines = [
        {"id": "h", "domain": "code", "task": HUMANEVAL, "response": "    return a + b\n"},
        {
            "id": "c",
            "domain": "code",
            "task": C_IO,
            "response": '```c\n#include <stdio.h>\nint main(){int a,b;scanf("%d %d",&a,&b);'
            'printf("%d\\n",a*b);}\n```',
        },
        {"id": "x", "domain": "code", "task": {"language": "python", "cases": 3}, "response": ""},
    ]
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    argv = ["verify-batch", "--server", address, "--in", str(src), "--out", str(dst)]
    run = subprocess.run(
        [sys.executable, "-m", "forkgate.cli", *argv, "--trust", vkey],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    out = [json.loads(x) for x in dst.read_text().splitlines()]
    assert [o["status"] for o in out] == ["CORRECT", "WRONG_ANSWER", "ERROR"]
    assert out[1]["family"] == "scanf" and "case 0" in out[1]["detail"]


def test_a_missing_sandbox_is_infra_error_never_a_wrong_answer() -> None:
    from certd.authority.code_checker import CodeChecker
    from certd.config import CodeConfig
    from certd.domains.code import CodeTask, IoCase
    from certd.domains.verdict import Status

    checker = CodeChecker(CodeConfig(backend="docker", docker_image="forkgate/no-such-image:0"))
    try:
        task = CodeTask.io_cases("python", [IoCase("", "1\n")])
        verdicts = checker.verify_batch([(task, "print(1)"), (task, "print(2)")])
    finally:
        checker.close()
    assert [v.status for v in verdicts] == [Status.INFRA_ERROR, Status.INFRA_ERROR]
    assert "no-such-image" in verdicts[0].detail


def test_verify_batch_gives_each_code_item_its_own_elapsed_ms(address: str, tmp_path: Path) -> None:
    """Not the batch's mean: a program that sleeps 1 s reports at least 1,000 ms, and the
    quick one beside it in the same VerifyBatch reports another figure (real sandbox)."""
    task = {"language": "python", "cases": [{"stdin": "", "stdout": "6\n"}]}
    slow = "```python\nimport time\ntime.sleep(1.0)\nprint(6)\n```"
    lines = [
        {"id": 1, "domain": "code", "task": task, "response": "```python\nprint(6)\n```"},
        {"id": 2, "domain": "code", "task": task, "response": slow},
    ]
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    argv = ["verify-batch", "--server", address, "--in", str(src), "--out", str(dst)]
    run = subprocess.run(
        [sys.executable, "-m", "forkgate.cli", *argv],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    quick, sleepy = (json.loads(x) for x in dst.read_text().splitlines())
    assert quick["status"] == sleepy["status"] == "CORRECT", (quick, sleepy)
    assert sleepy["elapsed_ms"] >= 1000.0  # a lower bound: the sleep
    assert quick["elapsed_ms"] != sleepy["elapsed_ms"]  # the mean would repeat one figure
