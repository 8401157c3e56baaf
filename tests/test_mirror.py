"""The tests mirror the packages (issue 28, item 2): every folder of tests is a package or a
wing of envkit, so that a package's tests are found where the package is. Two folders are
not a package on purpose: ``trust`` holds the cross-cutting trust tests (bad input, faults at
named steps, credentials, output encoding) that exercise many packages at once, and
``fixtures`` holds data."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent
PACKAGE = ROOT.parent / "src" / "envkit"
NOT_PACKAGES = {"trust", "fixtures"}


def _folders(root: Path, *, skip: set[str]) -> set[str]:
    """Every folder below ``root`` that holds Python files, as a dotted path."""
    found = set()
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).parent.parts
        if parts and parts[0] not in skip and "__pycache__" not in parts:
            found.add(".".join(parts))
    return found


def test_every_test_folder_is_a_package_or_a_wing() -> None:
    packages = _folders(PACKAGE, skip=set())
    tests = _folders(ROOT, skip=NOT_PACKAGES)
    assert tests, "no test folder found"
    assert tests <= packages, f"test folders that are no package: {sorted(tests - packages)}"


def test_the_mirror_rule_catches_a_folder_of_no_package(tmp_path: Path) -> None:
    (tmp_path / "gpu" / "installed").mkdir(parents=True)
    (tmp_path / "gpu" / "installed" / "test_a.py").write_text("")
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "test_b.py").write_text("")
    tests = _folders(tmp_path, skip=NOT_PACKAGES)
    assert tests - _folders(PACKAGE, skip=set()) == {"kernels"}
