"""Package discovery (pyproject.toml holds everything else).

``forkgate`` lives in ``client/`` (``package-dir`` in pyproject.toml maps it), which a static
``packages.find`` table cannot rename, so the list is computed here: every package under
``certd/``, ``sandboxes/`` and ``client/`` (as ``forkgate``) is shipped, and a new subpackage
needs no edit. tests/unit/test_wheel.py builds the wheel and checks through it.
"""

from setuptools import Extension, find_packages, setup

setup(
    packages=[
        *find_packages(include=["certd", "certd.*", "sandboxes", "sandboxes.*"]),
        *("forkgate" + p.removeprefix("client") for p in find_packages(include=["client*"])),
    ],
    # The audit's Ed25519 verification under one known key (certd.signing.ed25519). Optional:
    # without a C compiler the package installs without it and the audit verifies through
    # ed25519-dalek or libsodium instead.
    ext_modules=[
        Extension(
            "certd.signing.fixedkey._ed25519",
            ["certd/signing/fixedkey/_ed25519.c"],
            extra_compile_args=["-O3"],
            optional=True,
        )
    ],
)
