"""The same behaviour from every backend, run for real (bubblewrap and a Docker engine)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_backends import BACKENDS, CEILING, make_backend, makefile_image

from sandboxes import ExecStatus, Limits, Program, Sandbox, SandboxConfigError, Worker
from sandboxes.docker import DEFAULT_IMAGE
from sandboxes.seccomp import docker_profile

HERE = Path(__file__).resolve()
SHORT = Limits(
    cpu_time_s=1.0,
    wall_time_s=2.0,
    memory_bytes=128 * 2**20,
    processes=8,
    output_bytes=4096,
    file_size_bytes=64 * 1024,
    open_files=32,
    workdir_bytes=16 * 2**20,
)


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    box = make_backend(request.param)
    try:
        yield box
    finally:
        box.close()


@pytest.fixture()
def worker(backend: Sandbox) -> Iterator[Worker]:
    w = backend.start_worker()
    try:
        yield w
    finally:
        w.kill()


def py(code: str, **kw: object) -> Program:
    return Program(argv=("python3", "main.py"), files={"main.py": code.encode()}, **kw)  # type: ignore[arg-type]


def test_one_shot_run_returns_stdout_and_exit_code(backend: Sandbox) -> None:
    r = backend.run(Program(argv=("python3", "-c", "print(6 * 7)")))
    assert r.status is ExecStatus.OK and r.stdout == b"42\n" and r.exit_code == 0
    assert r.wall_time_s > 0 and r.peak_memory_bytes > 0


def test_stdin_files_and_executables(worker: Worker) -> None:
    prog = Program(
        argv=("./run.sh",),
        files={"run.sh": b"#!/bin/sh\nread x\necho got $x; cat data.txt\n", "data.txt": b"D"},
        executables=frozenset({"run.sh"}),
        stdin=b"hello\n",
    )
    r = worker.run(prog, SHORT)
    assert (r.status, r.stdout) == (ExecStatus.OK, b"got hello\nD")


@pytest.mark.parametrize("inline", [False, True])
def test_nonzero_exit_and_signal_are_runtime_errors(worker: Worker, inline: bool) -> None:
    r = worker.run(py("import sys; sys.exit(3)", inline_python=inline), SHORT)
    assert (r.status, r.exit_code) == (ExecStatus.RUNTIME_ERROR, 3)
    r = worker.run(py("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"), SHORT)
    assert (r.status, r.signal) == (ExecStatus.RUNTIME_ERROR, 11)


def test_cpu_limit(worker: Worker) -> None:
    r = worker.run(py("while True: pass"), SHORT)
    assert r.status is ExecStatus.TIME_LIMIT


def test_wall_limit_kills_a_sleeper(worker: Worker) -> None:
    r = worker.run(py("import time; time.sleep(60)"), SHORT)
    assert r.status is ExecStatus.TIME_LIMIT and "wall" in r.detail
    assert worker.run(py("print(1)"), SHORT).ok


def test_memory_limit(worker: Worker) -> None:
    r = worker.run(py("x = bytearray(512 * 2**20)"), SHORT)
    assert r.status is ExecStatus.MEMORY_LIMIT


def test_output_is_capped_and_a_flood_is_killed(worker: Worker) -> None:
    r = worker.run(py("import sys\nwhile True: sys.stdout.write('x' * 65536)"), SHORT)
    assert r.status is ExecStatus.OUTPUT_LIMIT and r.stdout_truncated
    assert len(r.stdout) == SHORT.output_bytes


def test_file_size_limit(worker: Worker) -> None:
    r = worker.run(Program(argv=("sh", "-c", "exec head -c 1000000 /dev/zero > big")), SHORT)
    assert r.status is ExecStatus.OUTPUT_LIMIT


def test_no_network(worker: Worker) -> None:
    code = (
        "import socket\n"
        "s = socket.socket(); s.settimeout(1)\n"
        "try:\n    s.connect(('127.0.0.1', 22)); print('connected')\n"
        "except OSError as e:\n    print('refused', e.errno)\n"
        "print(sorted(n for _, n in socket.if_nameindex()))\n"
    )
    r = worker.run(py(code), SHORT)
    assert r.ok and b"connected" not in r.stdout
    assert b"eth" not in r.stdout


def test_environment_is_clean_and_host_is_invisible(backend: Sandbox, tmp_path: Path) -> None:
    os.environ["FORKGATE_TEST_SECRET"] = "s3cret"
    try:
        w = backend.start_worker()
    finally:
        del os.environ["FORKGATE_TEST_SECRET"]
    try:
        code = (
            "import os\n"
            "print(sorted(os.environ))\n"
            "print(open('/proc/1/environ','rb').read() if os.access('/proc/1/environ', os.R_OK)"
            " else b'denied')\n"
            f"print(os.path.exists({str(tmp_path)!r}), os.path.exists({str(HERE)!r}),"
            " os.path.exists('/root/.ssh'))\n"
        )
        r = w.run(py(code), SHORT)
    finally:
        w.kill()
    assert r.ok, r.stderr
    assert b"s3cret" not in r.stdout and b"FORKGATE" not in r.stdout
    assert r.stdout.splitlines()[0] == b"['HOME', 'LANG', 'PATH', 'TMPDIR']"
    assert r.stdout.splitlines()[2] == b"False False False"


def test_system_is_read_only(worker: Worker) -> None:
    code = (
        "import os\nfor p in ('/usr/evil', '/etc/evil', '/evil', '/bin/evil'):\n"
        "    try:\n        open(p, 'w').write('x'); print('wrote', p)\n"
        "    except OSError:\n        pass\nprint('done')\n"
    )
    r = worker.run(py(code), SHORT)
    assert r.ok and r.stdout == b"done\n"


def test_each_run_gets_a_fresh_workdir_and_tmp(worker: Worker) -> None:
    leave = "open('left.txt','w').write('x'); open('/tmp/left','w').write('x'); import os\n"
    assert worker.run(py(leave + "print(sorted(os.listdir('.')))"), SHORT).ok
    r = worker.run(py("import os; print(sorted(os.listdir('.')), os.listdir('/tmp'))"), SHORT)
    assert r.stdout == b"['main.py'] []\n"


def test_inline_runs_share_no_module_state(worker: Worker) -> None:
    """The template's warm modules are there, but what a run does to them, or any random
    state, never reaches the next run (each is a fresh fork of the untouched template)."""
    code = (
        "import sys\n"
        "warm = 'typing' in sys.modules\n"
        "import typing, random\n"
        "print(warm, getattr(typing, 'LEFT', None), random.random())\n"
        "typing.LEFT = 'x'\n"
    )
    first, second = (worker.run(py(code, inline_python=True), SHORT) for _ in range(2))
    assert first.ok and second.ok, (first.detail, second.detail)
    a, b = first.stdout.split(), second.stdout.split()
    assert a[:2] == b[:2] == [b"True", b"None"]
    assert a[2] != b[2]  # random is not seeded in the template


def test_inline_runs_get_their_own_main_and_leave_nothing_in_the_template(worker: Worker) -> None:
    """A run's ``__main__`` is a new module; the template's globals (its ballast of free
    blocks included), reachable through the frames, hold nothing of a run and what a run
    writes there never reaches the next one."""
    code = (
        "import sys\n"
        "names = sorted(vars(sys.modules['__main__']))\n"
        "f, others, ballast = sys._getframe(), {}, []\n"
        "while f is not None:\n"
        "    if f.f_globals is not globals():\n"
        "        others[id(f.f_globals)] = f.f_globals\n"
        "    f = f.f_back\n"
        "seen = any('LEFT_BY_A_RUN' in g for g in others.values())\n"
        "for g in others.values():\n"
        "    ballast = g.get('_BALLAST', ballast)\n"
        "    g['LEFT_BY_A_RUN'] = 1\n"
        "clean = all(o == 0.5 + int(o) if isinstance(o, float) else not any(o) for o in\n"
        "    ballast if not type(o) is object)\n"
        "ballast.append(b'from a run')\n"
        "print(names, seen, len(ballast) > 1, clean)\n"
    )
    first, second = (worker.run(py(code, inline_python=True), SHORT) for _ in range(2))
    assert first.ok and second.ok, (first.detail, second.detail)
    main = "['__builtins__', '__cached__', '__doc__', '__file__', '__loader__', '__name__', "
    main += "'__package__', '__spec__', 'sys']"
    assert first.stdout == second.stdout == f"{main} False True True\n".encode()


def test_a_preloaded_module_is_in_every_run_as_the_template_left_it(backend: Sandbox) -> None:
    """``Sandbox.preload``: the template imports trusted code once; every run finds it in
    ``sys.modules`` unchanged, whatever an earlier run did to its own copy."""
    box = make_backend(backend.name)
    box.preload("fg_preloaded", "VALUE = [1]\ndef total():\n    return sum(VALUE)\n")
    code = (
        "import gc, sys\n"
        "m = sys.modules['fg_preloaded']\n"
        "print(m.total(), m.__file__, gc.is_tracked(m.VALUE))\n"
        "m.VALUE.append(41)\n"
        "m.total = lambda: 42\n"
        "sys.modules['fg_preloaded'] = None\n"
    )
    w = box.start_worker()
    try:
        runs = [w.run(py(code, inline_python=True), SHORT) for _ in range(3)]
        plain = w.run(py("import sys\nprint('fg_preloaded' in sys.modules)"), SHORT)
    finally:
        w.kill()
        box.close()
    assert [r.stdout for r in runs] == [b"1 fg_preloaded.py True\n"] * 3, [r.detail for r in runs]
    assert plain.ok and plain.stdout == b"False\n"  # an exec'd interpreter has none of it
    with pytest.raises(SandboxConfigError):
        backend.preload("not a name", "")


def test_a_daemonised_child_is_killed_and_reported(worker: Worker) -> None:
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(600)\n"
        "    os._exit(0)\nprint('parent done')\n"
    )
    r = worker.run(py(code), SHORT)
    assert r.ok and r.anomaly is not None and "leftover" in r.anomaly
    r = worker.run(
        py("import os; print(sorted(p for p in os.listdir('/proc') if p.isdigit()))"), SHORT
    )
    pids = eval(r.stdout)
    assert len(pids) == 3  # the zygote (1), the inline-run template and this run


def test_fork_bomb_is_contained(worker: Worker) -> None:
    code = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    r = worker.run(py(code), SHORT)
    assert not r.ok
    assert worker.run(py("print('alive')"), SHORT).stdout == b"alive\n"


def test_signals_cannot_reach_the_zygote_or_host(worker: Worker) -> None:
    code = (
        "import os, signal\n"
        "for pid in (1, -1):\n    try:\n        os.kill(pid, signal.SIGKILL)\n"
        "    except OSError as e:\n        print('err', e.errno)\n"
        "print('still here')\n"
    )
    r = worker.run(py(code), SHORT)
    assert worker.run(py("print('alive')"), SHORT).stdout == b"alive\n"
    assert not worker.broken
    del r


@pytest.mark.parametrize(
    ("code", "completed"),
    [
        ("import os\nn = os.read(4, 64)\nos.write(3, n)\n", True),
        ("import os\nos.write(3, b'0' * 48)\n", False),
        ("import sys\nsys.exit(0)\n", False),
    ],
)
def test_completion_channel(worker: Worker, code: str, completed: bool) -> None:
    r = worker.run(py(code, completion_channel=True, inline_python=True), SHORT)
    assert r.completed is completed


def test_c_compiles_and_runs(worker: Worker) -> None:
    src = b'#include <stdio.h>\nint main(void){int a,b;scanf("%d %d",&a,&b);printf("%d\\n",a+b);}\n'
    compiled = worker.run(
        Program(argv=("sh", "-c", "gcc -O2 -o prog main.c >&2 && cat prog"), files={"main.c": src}),
        Limits(
            cpu_time_s=3,
            wall_time_s=4,
            memory_bytes=256 * 2**20,
            output_bytes=64 * 1024,
            file_size_bytes=1 * 2**20,
            processes=16,
            workdir_bytes=16 * 2**20,
        ),
    )
    assert compiled.ok, compiled.stderr
    r = worker.run(
        Program(
            argv=("./prog",),
            files={"prog": compiled.stdout},
            executables=frozenset({"prog"}),
            stdin=b"2 40",
        ),
        SHORT,
    )
    assert r.stdout == b"42\n"


def test_limits_above_the_ceiling_are_refused(backend: Sandbox) -> None:
    with pytest.raises(SandboxConfigError):
        backend.run(Program(argv=("true",)), Limits(cpu_time_s=CEILING.cpu_time_s * 2))


def test_the_makefile_builds_the_image_the_backend_uses() -> None:
    assert makefile_image() == DEFAULT_IMAGE


def test_docker_container_settings(backend: Sandbox) -> None:
    if backend.name != "docker":
        return
    cfg = backend.container_config()  # type: ignore[attr-defined]
    assert cfg["network_mode"] == "none" and cfg["read_only"] is True
    assert cfg["cap_drop"] == ["ALL"] and cfg["security_opt"][0] == "no-new-privileges"
    assert cfg["security_opt"][1:] == ["seccomp=" + docker_profile()]  # bwrap's policy
    assert cfg["user"] == "1000:1000" and cfg["pids_limit"] and cfg["mem_limit"]
    assert cfg["nano_cpus"] > 0 and set(cfg["tmpfs"]) == {"/work", "/tmp"}


def test_certd_doctor_reports_isolation() -> None:
    import json
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-m", "certd.cli", "doctor", "--docker", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    names = {f["name"]: f["status"] for f in report["findings"]}
    assert report["usable"] is True and names["bwrap run"] == "ok" and names["docker run"] == "ok"
    assert names["cgroups"] in ("ok", "warn")  # warn names why, e.g. no writable cgroupfs
