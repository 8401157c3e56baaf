"""How envkit says a count: the noun, and the verb beside it, agreeing with the number
("1 module needs", "3 modules need"), never "module(s)". Below every package, so the core's
messages and the renderers say counts the same way.

>>> counted(1, "node")
'1 node'
>>> counted(3, "model type")
'3 model types'
>>> f"{counted(2, 'module')} {agree(2, 'needs', 'need')} them"
'2 modules need them'
>>> every(1, "cell"), every(2, "cell"), every(5, "check")
('The cell', 'Both cells', 'All 5 checks')
>>> listed(["a", "b", "c", "d"], 2)
'a, b and 2 more'
"""

from __future__ import annotations

from collections.abc import Sequence


def counted(count: int, noun: str, plural: str = "") -> str:
    """``count`` with ``noun``, or its ``plural`` (else ``noun`` + s) for any other count."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def agree(count: int, one: str, many: str) -> str:
    """``one`` for a count of one, else ``many``: the verb beside :func:`counted`."""
    return one if count == 1 else many


def every(count: int, noun: str) -> str:
    """The whole of ``count`` things, at the start of a sentence: 'The cell', 'Both cells',
    'All 5 cells'."""
    if count == 1:
        return f"The {noun}"
    return f"Both {noun}s" if count == 2 else f"All {count} {noun}s"


def listed(names: Sequence[str], shown: int) -> str:
    """The first ``shown`` of ``names``, then how many more: 'a, b, c and 4 more'."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more
