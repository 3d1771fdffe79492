"""Function tests that cannot be faked: the solution and the tests in two processes (issue #36).

Through a real certd on loopback, on bwrap and on Docker. Every hostile program below is wrong
(its ``add``/``srt``/``root`` returns a wrong value) unless its attack works: an always-equal
object that reaches a comparison, a forged completion nonce, a patched ``check`` or assertion,
or a view of the tests. ``status != CORRECT`` is therefore the containment check. The honest
controls (subclasses of builtins, exceptions the tests expect, NaN, big ints) stay CORRECT.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from server_helpers import LAZY_MATH_SECTION

from certd.config import CertdConfig
from certd.service.server import CertdServer
from certd.v1 import tasks_pb2
from forkgate import CertdClient, ClientSettings, VerifyItem


def _task(entry: str, test: str, prompt: str = "") -> dict[str, object]:
    body = {"language": "python", "prompt": prompt, "test": test, "entry_point": entry}
    return {"domain": "code", "task": body}


ADD = _task(
    "add",
    "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(5, 5) == 10\n",
)
SRT = _task(
    "srt",
    "def check(candidate):\n    assert candidate([3, 1, 2]) == [1, 2, 3]\n"
    "    assert candidate([]) == []\n",
)
ROOT = _task("root", "def check(candidate):\n    assert abs(candidate(2.0) - 1.41421356) < 1e-6\n")
EVENS = _task("even", "def check(candidate):\n    assert all(map(candidate, [2, 4, 6]))\n")
RAISES = _task(
    "inv",
    "def check(candidate):\n    try:\n        candidate(0)\n        assert False, 'no error'\n"
    "    except ZeroDivisionError:\n        pass\n    assert candidate(4) == 0.25\n",
)

# The issue's table: every one of these was CORRECT while the tests and the solution shared one
# interpreter.
TABLE = {
    "int-subclass-always-equal": (
        ADD,
        "class A(int):\n    def __eq__(self, o):\n        return True\n"
        "def add(a, b):\n    return A(0)\n",
    ),
    "list-subclass-always-equal": (
        SRT,
        "class L(list):\n    def __eq__(self, o):\n        return True\n"
        "def srt(xs):\n    return L()\n",
    ),
    "forged-nonce": (ADD, "import os\nos.write(3, os.read(4, 64))\nos._exit(0)\n"),
    "forged-nonce-after-gc-walk": (
        ADD,
        "import gc, os\nfor o in gc.get_objects():\n    if isinstance(o, dict) and 'check' in o:\n"
        "        o['check'] = lambda c: None\nos.write(3, os.read(4, 64))\nos._exit(0)\n",
    ),
}
_BASES = {
    "int": "0",
    "float": "0.0",
    "str": "''",
    "bytes": "b''",
    "list": "[]",
    "tuple": "()",
    "dict": "{}",
    "set": "set()",
    "frozenset": "frozenset()",
    "object": "",
}
_TRICKS = {
    "eq": "    def __eq__(self, o):\n        return True\n",
    "eq-ne": "    __eq__ = lambda s, o: True\n    __ne__ = lambda s, o: False\n",
    "eq-hash-bool": "    __eq__ = lambda s, o: True\n    __hash__ = lambda s: 0\n"
    "    __bool__ = lambda s: True\n    __len__ = lambda s: 1\n",
}


def always_equal() -> Iterator[tuple[str, dict[str, object], str]]:
    """Objects that compare equal to anything, of every base the codec knows and of object."""
    for base, ctor in _BASES.items():
        for trick, body in _TRICKS.items():
            program = f"class X({base}):\n{body}\ndef add(a, b):\n    return X({ctor})\n"
            yield f"{base}-{trick}", ADD, program
    yield (
        "float-sub-zero",
        ROOT,
        (
            "class F(float):\n    __sub__ = lambda s, o: 0.0\n    __rsub__ = __sub__\n"
            "    __abs__ = lambda s: 0.0\n    __lt__ = lambda s, o: True\n"
            "def root(x):\n    return F(0.0)\n"
        ),
    )
    yield (
        "list-subclass-iter",
        SRT,
        (
            "class L(list):\n    __eq__ = lambda s, o: True\n"
            "    __iter__ = lambda s: iter([1, 2, 3])\n"
            "def srt(xs):\n    return L([9])\n"
        ),
    )
    yield "returns-the-argument-mutated-later", SRT, "def srt(xs):\n    return xs\n"


_NONCE = {
    "fd-3-4": "os.write(3, os.read(4, 64)); os._exit(0)\n",
    "every-fd": (
        "data = b''\nfor fd in range(3, 1024):\n    try:\n        os.set_blocking(fd, False)\n"
        "        data += os.read(fd, 64)\n    except OSError:\n        pass\n"
        "for fd in range(3, 1024):\n    try:\n        os.write(fd, data or b'0' * 48)\n"
        "    except OSError:\n        pass\nos._exit(0)\n"
    ),
    "proc-fds-of-every-process": (
        "data = b''\nfor pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
        "    for fd in ('3', '4'):\n        try:\n"
        "            f = os.open(f'/proc/{pid}/fd/{fd}', os.O_RDWR | os.O_NONBLOCK)\n"
        "            data += os.read(f, 64) if fd == '4' else b''\n"
        "            os.write(f, data)\n        except OSError:\n            pass\nos._exit(0)\n"
    ),
    "pidfd-getfd-of-the-parent": (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "pidfd = libc.syscall(434, os.getppid(), 0)\n"
        "r, w = libc.syscall(438, pidfd, 4, 0), libc.syscall(438, pidfd, 3, 0)\n"
        "try:\n    os.write(w, os.read(r, 64))\nexcept OSError:\n    pass\nos._exit(0)\n"
    ),
    "ptrace-the-parent": (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "if libc.ptrace(16, os.getppid(), 0, 0) == 0:\n    win()\n"
    ),
    "parent-memory": (
        "try:\n    open(f'/proc/{os.getppid()}/mem', 'rb')\n    win()\nexcept OSError:\n    pass\n"
    ),
    "kill-the-tests-process": "import signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
    "exit-0-in-the-call": None,
}
_INTROSPECTION = {
    "gc-finds-check": (
        "import gc\nif any(getattr(o, '__name__', None) == 'check' for o in gc.get_objects()):\n"
        "    win()\n"
    ),
    "gc-forges-through-a-found-os": (
        "import gc, types\nfor o in gc.get_objects():\n    if not isinstance(o, dict):\n"
        "        continue\n    for v in list(o.values()):\n"
        "        if isinstance(v, types.ModuleType) and v.__name__ == 'os':\n"
        "            try:\n                v.write(3, v.read(4, 64))\n                v._exit(0)\n"
        "            except OSError:\n                pass\n"
    ),
    "sys-modules-main": (
        "import sys\nfor k, v in list(vars(sys.modules['__main__']).items()):\n"
        "    if k == 'check' or getattr(v, '__name__', '') == 'check':\n        win()\n"
    ),
    "frames": (
        "import sys\nf = sys._getframe()\nwhile f is not None:\n"
        "    if f.f_code.co_filename == 'tests.py' or 'check' in f.f_globals:\n        win()\n"
        "    f = f.f_back\n"
    ),
    "inspect-stack": (
        "import inspect\nif any(fr.filename == 'tests.py' for fr in inspect.stack()):\n    win()\n"
    ),
    "rebind-assertion-error": (
        "import builtins\nbuiltins.AssertionError = type('AssertionError', (Exception,), {})\n"
    ),
    "tests-file-readable": "if os.path.exists('tests.py'):\n    win()\n",
    "caller-frame-at-call": None,
}
# An attack that works calls win(); add is right only then.
_WIN = "WON = []\ndef win():\n    WON.append(1)\n"
_ADD_IF_WON = "def add(a, b):\n    return a + b if WON else 0\n"


def nonce_and_introspection() -> Iterator[tuple[str, dict[str, object], str]]:
    """Forgeries of the completion signal and reaches into the tests, at import and per call."""
    for name, body in {**_NONCE, **_INTROSPECTION}.items():
        if body is None:
            continue
        yield f"{name}-at-import", ADD, f"import os\n{_WIN}{_ADD_IF_WON}{body}"
        indented = "".join(f"        {line}\n" for line in body.splitlines())
        yield (
            f"{name}-in-the-call",
            ADD,
            (
                f"import os\n{_WIN}def add(a, b):\n    if a == 1:\n{indented}"
                "    return a + b if WON else 0\n"
            ),
        )
    yield "stop-iteration-ends-the-tests-loop", EVENS, ("def even(x):\n    raise StopIteration\n")
    yield "exit-0-in-the-call", ADD, "import sys\ndef add(a, b):\n    sys.exit(0)\n"
    yield (
        "caller-frame-at-call",
        ADD,
        (
            "import sys\ndef add(a, b):\n    f = sys._getframe(1)\n    while f is not None:\n"
            "        f.f_globals['check'] = lambda c: None\n        f.f_locals.clear()\n"
            "        f = f.f_back\n    return 0\n"
        ),
    )


HONEST = {
    "plain": (ADD, "def add(a, b):\n    return a + b\n"),
    "int-subclass": (
        ADD,
        "import enum\nclass N(enum.IntEnum):\n    pass\nclass I(int):\n    pass\n"
        "def add(a, b):\n    return I(a + b)\n",
    ),
    "sorted-list-subclass": (
        SRT,
        "class L(list):\n    pass\n"
        "def srt(xs):\n    print('sorting', xs)\n    return L(sorted(xs))\n",
    ),
    "float": (ROOT, "def root(x):\n    return x ** 0.5\n"),
    "expected-exception": (RAISES, "def inv(x):\n    return 1 / x\n"),
    "namedtuple-defaultdict-nan-bigint": (
        _task(
            "f",
            "import math\ndef check(c):\n    t, d, n, b = c()\n    assert t == (1, 2)\n"
            "    assert d == {'a': [1]}\n    assert math.isnan(n)\n    assert b == 2 ** 4000\n",
        ),
        "from collections import namedtuple, defaultdict\nP = namedtuple('P', 'x y')\n"
        "def f():\n    d = defaultdict(list)\n    d['a'].append(1)\n"
        "    return P(1, 2), d, float('nan'), 2 ** 4000\n",
    ),
    "prompt-helper": (
        _task(
            "twice",
            "def check(c):\n    assert c(3) == helper(3) * 2\n",
            prompt="def helper(x):\n    return x + 1\n\ndef twice(x):\n",
        ),
        "    return helper(x) * 2\n",
    ),
}


@pytest.fixture(scope="module", params=["bwrap", "docker"])
def client(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CertdClient]:
    cfg = CertdConfig.model_validate(
        {
            "data_dir": str(tmp_path_factory.mktemp(f"certd-{request.param}")),
            "listen": "127.0.0.1:0",
            "math": LAZY_MATH_SECTION,
            "code": {
                "backend": request.param,
                "pool_size": 2,
                "cpu_time_s": 2.0,
                "wall_time_s": 4.0,
                "memory_bytes": 256 << 20,
                "processes": 16,
                "docker_image": os.environ.get(
                    "FORKGATE_SANDBOX_IMAGE", "forkgate/sandbox-runner:1"
                ),
            },
        }
    )
    srv = CertdServer(cfg)
    srv.start()
    try:
        with CertdClient(f"127.0.0.1:{srv.port}", settings=ClientSettings(timeout_s=300)) as c:
            yield c
    finally:
        srv.stop(grace_s=1.0)


def _verify(c: CertdClient, cases: list[tuple[str, dict[str, object], str]]) -> dict[str, Any]:
    items = [
        VerifyItem(task, "```python\n" + program + "```", name) for name, task, program in cases
    ]
    return {v.id: v for v in c.verify_batch(items)}


def _contained(c: CertdClient, cases: list[tuple[str, dict[str, object], str]]) -> None:
    verdicts = _verify(c, cases)
    allowed = (tasks_pb2.WRONG_ANSWER, tasks_pb2.RUNTIME_ERROR, tasks_pb2.TIME_LIMIT)
    bad = {
        name: (tasks_pb2.VerdictStatus.Name(v.status), v.detail)
        for name, v in verdicts.items()
        if v.status not in allowed
    }
    assert not bad, f"{len(bad)} of {len(cases)} not WRONG_ANSWER/RUNTIME_ERROR: {bad}"


def test_the_issue_table_is_wrong_or_runtime_error(client: CertdClient) -> None:
    _contained(client, [(name, task, program) for name, (task, program) in TABLE.items()])


def test_always_equal_variants_never_reach_a_comparison(client: CertdClient) -> None:
    cases = list(always_equal())
    assert len(cases) >= 30
    _contained(client, cases)


def test_nonce_forgery_and_introspection_variants_fail(client: CertdClient) -> None:
    cases = list(nonce_and_introspection())
    assert len(cases) >= 30
    _contained(client, cases)


def test_a_solution_that_patches_the_preloaded_harness_is_not_correct(
    client: CertdClient,
) -> None:
    """The harness is preloaded in the template (``Sandbox.preload``): the solution's process
    holds a copy of it, and whatever it changes there (the proxy, ``main``, the fault records)
    reaches neither the test process nor a later check."""
    patch = (
        "import sys\n"
        "for m in list(sys.modules.values()):\n"
        "    if getattr(m, '__name__', '').startswith('forkgate_harness'):\n"
        "        m._Proxy.call = lambda self, args, kwargs: args[0] + args[1]\n"
        "        m._Proxy.fail = lambda self, message: None\n"
        "        m._finish = lambda proxy: None\n"
        "        m.main = lambda entry: None\n"
        "        m.decode = lambda data: ((1, 2), {})\n"
    )
    wrong = patch + "def add(a, b):\n    return 0\n"
    honest = HONEST["plain"][1]
    cases = [("patch", ADD, wrong), ("after", ADD, honest), ("patch-top", ADD, patch + "x = 1\n")]
    verdicts = _verify(client, cases)
    assert verdicts["patch"].status == tasks_pb2.WRONG_ANSWER, verdicts["patch"].detail
    assert verdicts["after"].status == tasks_pb2.CORRECT, verdicts["after"].detail
    assert verdicts["patch-top"].status == tasks_pb2.RUNTIME_ERROR, verdicts["patch-top"].detail


def test_a_non_data_result_is_a_runtime_error_naming_its_type(client: CertdClient) -> None:
    (v,) = _verify(client, [("obj", ADD, TABLE["int-subclass-always-equal"][1])]).values()
    assert v.status == tasks_pb2.WRONG_ANSWER, v.detail
    program = "class A:\n    pass\ndef add(a, b):\n    return A()\n"
    (v,) = _verify(client, [("obj", ADD, program)]).values()
    assert v.status == tasks_pb2.RUNTIME_ERROR
    assert "returned an object of type A" in v.detail


def test_honest_controls_are_correct(client: CertdClient) -> None:
    verdicts = _verify(client, [(name, task, program) for name, (task, program) in HONEST.items()])
    bad = {n: v.detail for n, v in verdicts.items() if v.status != tasks_pb2.CORRECT}
    assert not bad, bad


def test_a_test_passing_a_callback_is_refused_as_a_task_error(client: CertdClient) -> None:
    task = _task("apply", "def check(c):\n    assert c(lambda: 3) == 3\n")
    (v,) = _verify(client, [("cb", task, "def apply(f):\n    return f()\n")]).values()
    assert v.status == tasks_pb2.INFRA_ERROR
    assert "task error" in v.detail and "type function" in v.detail


def test_a_test_without_check_is_a_task_error(client: CertdClient) -> None:
    task = _task("add", "def verify(c):\n    assert c(1, 2) == 3\n")
    (v,) = _verify(client, [("nocheck", task, HONEST["plain"][1])]).values()
    assert v.status == tasks_pb2.INFRA_ERROR and "defines no check" in v.detail, v.detail


def test_a_solution_that_closes_its_reply_pipe_is_not_correct(client: CertdClient) -> None:
    program = (
        "import os\ndef add(a, b):\n    for fd in range(3, 64):\n        try:\n"
        "            os.write(fd, b'\\0\\0\\0\\0')\n            os.close(fd)\n"
        "        except OSError:\n            pass\n    return a + b\n"
    )
    (v,) = _verify(client, [("empty", ADD, program)]).values()
    assert v.status in (tasks_pb2.RUNTIME_ERROR, tasks_pb2.TIME_LIMIT), v.detail
