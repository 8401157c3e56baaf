"""The shipped vLLM 0.8.5 cell as a real image: buildah installs the published lock from the
package index (about 7 GB) on the Debian base and envkit's checks run inside it."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from base import buildah, ensure_base
from helpers import envkit, output

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.mark.network
@pytest.mark.container
def test_the_vllm_085_cell_becomes_an_image_with_its_pins_inside(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    base = ensure_base(tmp_path_factory.mktemp("base"))
    tag = f"localhost/envkit-test/vllm-085:{uuid.uuid4().hex[:8]}"
    res = envkit(
        "image",
        "vllm-0.8.5+qwen2-vl",
        "--cell",
        "py3.11-linux-x86_64-cu124",
        "--base",
        base,
        "--tag",
        tag,
        "--json",
        cwd=ROOT,
    )
    try:
        res.assert_ok()
        data = output("image", res.out)
        assert data["versions"] == {"vllm": "0.8.5", "transformers": "4.51.3", "torch": "2.6.0"}
        name = f"envkit-test-{uuid.uuid4().hex[:8]}"
        buildah("from", "--pull-never", "--name", name, tag)
        try:
            said = buildah(
                "run",
                "--isolation",
                "chroot",
                name,
                "--",
                "/opt/venv/bin/python",
                "-c",
                "import json, importlib.metadata as m; "
                "print(json.dumps({d: m.version(d) for d in ('vllm', 'transformers', 'torch')}))",
            ).stdout
        finally:
            buildah("rm", name, check=False)
        assert json.loads(said) == {"vllm": "0.8.5", "transformers": "4.51.3", "torch": "2.6.0"}
    finally:
        buildah("rmi", tag, check=False)
