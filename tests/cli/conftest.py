"""Fixtures of the CLI tests: the harness tests' own (tests/worker/conftest.py: offline, isolated settings, a
store URL, tests/helpers on the path), shared because every CLI command drives the harness.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_HARNESS = Path(__file__).parents[1] / "worker" / "conftest.py"
_spec = importlib.util.spec_from_file_location("harness_conftest", _HARNESS)
_harness = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_harness)
# Every fixture it defines, under the same name (pytest collects fixtures from this module's names).
globals().update({name: value for name, value in vars(_harness).items()
                  if type(value).__name__ == "FixtureFunctionDefinition" or hasattr(value, "_pytestfixturefunction")})
