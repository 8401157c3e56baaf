from __future__ import annotations

from collections.abc import Iterator

import pytest

import indexserver


@pytest.fixture(scope="session")
def upgrade_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[indexserver.Server]:
    """A local index publishing upgrade_world's wheels (with range requests and upload times)."""
    import upgrade_world as uw

    folder = tmp_path_factory.mktemp("upgrade-world")
    for wheel in uw.wheels():
        wheel.write(folder)
    with indexserver.serve(folder) as server:
        server.upload_times = uw.upload_times(folder)
        yield server
