"""The ``certd`` command line builds its parser without what only some verbs run.

Every ``certd`` process parses its arguments first, and the suite starts many of them
(``audit``, ``witness``, ``keygen``, ``--help``...). The parser once imported the config model
(pydantic) and the audit engine for every verb: 0.72 instead of 0.39 CPU-seconds per parse
here without bytecode caches. Each verb imports those where it runs. The check runs
in a fresh interpreter and reads ``sys.modules`` after building the parser.
"""

from __future__ import annotations

import json
import subprocess
import sys

NOT_FOR_THE_PARSER = ("pydantic", "certd.config", "certd.ledger.audit", "certd.ledger.store")

CODE = """
import json, sys
from certd.cli import build_parser
build_parser().parse_args(["audit", "--data-dir", "d"])
print(json.dumps(sorted(sys.modules)))
"""


def test_building_the_certd_parser_loads_no_config_model_and_no_audit_engine() -> None:
    run = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, run.stderr[-2000:]
    modules = set(json.loads(run.stdout.splitlines()[-1]))
    assert "certd.audit_cli" in modules  # the verb's parser is built, its engine is not loaded
    loaded = [m for m in NOT_FOR_THE_PARSER if m in modules]
    assert loaded == [], f"building the parser loaded {loaded}"
