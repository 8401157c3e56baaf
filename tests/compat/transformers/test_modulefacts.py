"""What a transformers module provides, read from a small source we write in the shape of
transformers' package ``__init__``: its star re-exports, placeholders for a missing backend
left out."""

from __future__ import annotations

import ast
import textwrap

from envkit.compat.transformers.modulefacts import is_placeholder, module_facts

INIT = textwrap.dedent(
    """\
    from .utils import OptionalDependencyNotAvailable, is_torch_available

    try:
        if not is_torch_available():
            raise OptionalDependencyNotAvailable()
    except OptionalDependencyNotAvailable:
        from .utils.dummy_pt_objects import *
    else:
        from .models.bert import *

    from .utils.dummy_tokenizers_objects import *
    from .utils.dummies import *
    """
)


def test_a_backends_placeholders_are_not_followed_and_real_modules_are() -> None:
    facts = module_facts(ast.parse(INIT), "transformers", is_package=True)
    assert facts.stars == ("transformers.models.bert", "transformers.utils.dummies")
    assert {"OptionalDependencyNotAvailable", "is_torch_available"} <= facts.names


def test_placeholder_modules_by_name() -> None:
    assert is_placeholder("transformers.utils.dummy_pt_objects")
    assert is_placeholder("transformers.utils.dummy_sentencepiece_and_tokenizers_objects")
    assert not is_placeholder("transformers.utils.dummy_pt")
    assert not is_placeholder("transformers.models.dummy_objects")
    assert not is_placeholder("transformers.utils.import_utils")
