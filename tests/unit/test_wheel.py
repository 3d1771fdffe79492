# ruff: noqa: E501  (subprocess command lines read best on one line)
"""The built wheel works on its own: every package is in it and it checks all three domains.

Builds the wheel from this checkout (``python -m build --wheel --no-isolation``: offline),
installs it with ``--no-deps`` into a fresh virtual environment whose only other packages
are the dependencies already installed in this one (their site-packages directory is
appended to ``sys.path`` by a ``.pth`` line, which does not run the editable install's
hook), and runs, from outside the checkout, a real certd from the wheel that verifies one
Countdown, one math and one code response through the wheel's ``forkgate`` client.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHECK = r"""
import json, pathlib, sys, tempfile
import certd, forkgate
from certd.config import CertdConfig
from certd.service.server import CertdServer
from forkgate import CertdClient, ClientSettings

home = pathlib.Path(sys.prefix)
for mod in (certd, forkgate):
    assert pathlib.Path(mod.__file__).is_relative_to(home), mod.__file__
server = CertdServer(CertdConfig(data_dir=pathlib.Path(tempfile.mkdtemp()) / "d", listen="127.0.0.1:0"))
server.start()
try:
    code = {"domain": "code", "language": "python", "entry_point": "add",
            "prompt": "def add(a, b):\n    '''Add two numbers.'''\n",
            "test": "def check(c):\n    assert c(1, 2) == 3\n"}
    settings = ClientSettings(timeout_s=300)  # the first math and code checks start pools
    with CertdClient(f"127.0.0.1:{server.port}", trusted_keys=[server.key.verifier()], settings=settings) as c:
        verdicts = c.verify_batch([
            ({"domain": "countdown", "numbers": [25, 5, 4, 3], "target": 83}, "<answer>(25-5)*4+3</answer>"),
            ({"domain": "math", "gold": "1/2"}, "The answer is $\\boxed{\\frac{1}{2}}$."),
            (code, "    return a + b\n"),
        ])
    print(json.dumps([[v.verifier, v.status, v.detail] for v in verdicts]))
finally:
    server.stop(grace_s=1)
"""


def test_the_wheel_has_every_package_and_checks_three_domains(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "-o", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    [wheel] = dist.glob("forkgate-*.whl")
    shipped = {
        n.rsplit("/", 1)[0] for n in zipfile.ZipFile(wheel).namelist() if n.endswith("/__init__.py")
    }
    wanted = {
        str(p.parent.relative_to(ROOT)).replace("client", "forkgate", 1)
        for top in ("certd", "sandboxes", "client")
        for p in (ROOT / top).rglob("__init__.py")
    }
    assert wanted <= shipped, sorted(wanted - shipped)
    assert "certd/domains/math/fastlatex" in shipped

    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    (site / "deps-from-the-dev-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
    run = subprocess.run(
        [str(python), "-c", CHECK],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    verdicts = json.loads(run.stdout.strip().splitlines()[-1])
    assert [v[0].split("@")[0] for v in verdicts] == ["countdown", "math", "code"], verdicts
    assert [v[1] for v in verdicts] == [1, 1, 1], verdicts  # CORRECT
