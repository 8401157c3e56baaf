"""upgrade's side-by-side columns: whatever the values (long words, escapes, any script), every
line fits the width and no character is lost (folded, never cut)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.render.term import shown
from envkit.render.upgrade import GAP, _cells, _listed, _widths


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.text(max_size=200), min_size=4, max_size=4), st.integers(60, 200))
def test_every_line_fits_and_nothing_is_cut(texts: list[str], width: int) -> None:
    widths = _widths(width)
    lines = _cells(texts, widths)
    assert all(len(line) <= width for line in lines)
    start = 0
    for text, w in zip(texts, widths, strict=True):  # each column read back from its lines
        column = "".join(line[start : start + w] for line in lines)
        assert "".join(column.split()) == "".join(shown(text).split())
        start += w + GAP


def test_a_long_list_says_how_many_more_it_leaves_to_the_json() -> None:
    names = [f"Arch{n}" for n in range(30)]
    said = _listed(", ".join(names))
    assert said.startswith("Arch0, Arch1") and said.endswith("and 22 more (--json lists all)")
    assert _listed(", ".join(names[:12])) == ", ".join(names[:12])
