"""How hard the property tests (hypothesis ``@given``) look, suite-wide.

``tests/conftest.py`` loads one profile before any test module is imported: ``envkit`` (no
deadline: a loaded machine is not a failure; examples drawn afresh each run, never
derandomized, so every run looks somewhere new) or, with ``ENVKIT_HYPOTHESIS=thorough``,
``thorough``: ten times each test's examples, for a periodic deep run. A test sizes its
search with ``examples(n)``: n where each example is cheap or the space is wide, fewer where
each example runs commands and the space is small."""

from __future__ import annotations

import os

from hypothesis import settings

PROFILE = "thorough" if os.environ.get("ENVKIT_HYPOTHESIS", "") == "thorough" else "envkit"
FACTOR = 10 if PROFILE == "thorough" else 1

settings.register_profile("envkit", deadline=None, print_blob=True)
settings.register_profile("thorough", settings.get_profile("envkit"), max_examples=100 * FACTOR)


def examples(n: int) -> int:
    """The examples a test with n tries under the chosen profile."""
    return n * FACTOR


def load() -> None:
    settings.load_profile(PROFILE)
