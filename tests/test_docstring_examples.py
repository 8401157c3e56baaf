"""The ``>>>`` examples in the docstrings of the core value types run, as packaging's
specifiers do: an example that no longer holds fails here, so the docs cannot drift."""

from __future__ import annotations

import doctest
import importlib

import pytest

# the modules whose value types carry examples; each must keep at least one
WITH_EXAMPLES = (
    "envkit.gpu.arch",
    "envkit.gpu.binaries.dynsym",
    "envkit.gpu.needs",
    "envkit.io.escaping",
    "envkit.io.typedjson",
    "envkit.lock.cells",
    "envkit.releases.torchversion",
    "envkit.results",
    "envkit.serving.plan.verdict",
    "envkit.syntax",
    "envkit.wording",
)


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_the_docstring_examples_hold(name: str) -> None:
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.IGNORE_EXCEPTION_DETAIL)
    tests = [t for t in finder.find(module) if t.examples]
    assert tests, f"{name} has no docstring example left"
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) of {name} fail (see above)"
