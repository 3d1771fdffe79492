"""A certd without the math extra (no SymPy, as the single-node image) answers a batch with a
math line per item: the math item "domain not served here", the others checked; never
INTERNAL for the whole batch (the math task's package imported SymPy while converting)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from forkgate.errors import SetupError
from forkgate.local import LocalCertd

SCRIPT = textwrap.dedent(
    """
    import sys
    sys.modules["sympy"] = None  # the math extra is not installed: `import sympy` fails
    from pathlib import Path
    from certd.config import CertdConfig, MathConfig
    from certd.service.server import CertdServer
    from forkgate import CertdClient, Status

    cfg = CertdConfig(
        data_dir=Path(sys.argv[1]), listen="127.0.0.1:0", math=MathConfig(enabled=False)
    )
    server = CertdServer(cfg)
    server.start()
    try:
        task = {"domain": "countdown", "task": {"numbers": [25, 5, 4, 3], "target": 83}}
        half = {"domain": "math", "task": {"gold": "1/2"}}
        with CertdClient(f"127.0.0.1:{server.port}") as c:
            ok, math = c.verify_batch([(task, "<answer>(25-5)*4+3</answer>"), (half, "1/2")])
        assert ok.status is Status.CORRECT, ok
        assert math.status is Status.INFRA_ERROR, math
        assert math.detail.startswith("domain 'math' not served here"), math.detail
        assert "sympy" not in sys.modules or sys.modules["sympy"] is None
    finally:
        server.stop(grace_s=1)
    print("per-item")
    """
)


def test_a_math_line_without_sympy_is_a_per_item_verdict(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "d")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert done.stdout.strip().endswith("per-item")


def test_without_the_math_extra_certd_and_local_certd_name_it_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default config (math on) without SymPy: `certd serve` exits 2 with one line naming
    the extra, and `LocalCertd` (what `forkgate run` starts) raises that line as a SetupError,
    never ``KeyError: 'address'`` (issue 32)."""
    shadow = tmp_path / "no-math-extra"
    shadow.mkdir()
    # sympy not installed: neither found nor importable (the server only looks for it; its
    # math workers import it), in every interpreter started with this PYTHONPATH
    (shadow / "sitecustomize.py").write_text("import sys\n\nsys.modules['sympy'] = None\n")
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(shadow), path])))
    serve = subprocess.run(
        [sys.executable, "-m", "certd.cli", "serve", "--data-dir", str(tmp_path / "d"),
         "--listen", "127.0.0.1:0"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    lines = [x for x in serve.stderr.splitlines() if x.strip()]
    assert serve.returncode == 2 and len(lines) == 1, serve.stderr[-3000:]
    assert "needs the forkgate[math] extra (sympy is not installed)" in lines[0]
    with pytest.raises(SetupError, match=r"could not start: .*needs the forkgate\[math\] extra"):
        LocalCertd(tmp_path / "data")
