"""A certd that never checks math loads none of math's libraries (issue 34).

With ``math.warm_start`` off the math checker starts on first use; its pool workers import
SymPy and the LaTeX grammar (or inherit them from a warm forkserver), the server does not, and
the first-step κ's model (torch, NumPy) loads on the first label. A server start therefore
costs no import it does not use. The check runs in a fresh interpreter and reads
``sys.modules`` after a real start and stop.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = ("sympy", "latex2sympy2_extended", "antlr4", "numpy", "torch", "transformers")

CODE = """
import json, sys
from certd.config import CertdConfig
from certd.service.server import CertdServer
cfg = CertdConfig.model_validate({
    "data_dir": sys.argv[1], "listen": "127.0.0.1:0",
    "math": {"warm_start": False}, "countdown": {"verify_workers": 0},
})
server = CertdServer(cfg)
server.start()
assert server.port > 0
served = sorted(sys.modules)
server.stop(grace_s=0.0)
print(json.dumps(served))
"""


def test_a_server_that_checks_no_math_loads_no_math_library(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-c", CODE, str(tmp_path / "certd-data")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    modules = json.loads(run.stdout.splitlines()[-1])
    assert "certd.authority.math_checker" in modules  # math is served, just not loaded
    heavy = [m for m in modules if m.split(".")[0] in HEAVY]
    assert heavy == [], f"a server start loaded {heavy[:10]}"
