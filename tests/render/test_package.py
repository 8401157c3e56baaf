"""``envkit.render`` gives every formatter by name, each module imported when a name of it
is first asked for."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from envkit import render


def test_every_name_is_its_module_s_own() -> None:
    for name in render.__all__:
        home = importlib.import_module(f"envkit.render.{render._HOMES.get(name, name)}")
        assert getattr(render, name) is getattr(home, name), name
    assert set(render.__all__) == {*render._HOMES, "image"}  # image: imported at once


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_formatter"):
        render.no_such_formatter  # noqa: B018


def test_importing_the_package_loads_no_formatter() -> None:
    code = "import sys, json, envkit.render\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = {m for m in json.loads(done.stdout) if m.startswith("envkit.render.")}
    # image's function shares its module's name, so the module is imported at once (the env
    # module it formats reports with only when it does)
    assert loaded <= {"envkit.render.image", "envkit.render.term"}
