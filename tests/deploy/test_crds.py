"""The custom resources envkit export writes (LeaderWorkerSet, KServe's ServingRuntime and
InferenceService) against their own CRDs' schemas, when the CRD files are at hand: give a
folder holding ``leaderworkerset.x-k8s.io_leaderworkersets.yaml`` (LeaderWorkerSet's
``config/crd/bases``) and ``serving.kserve.io_servingruntimes.yaml`` and
``serving.kserve.io_inferenceservices.yaml`` (KServe's ``config/crd/full``) as
``ENVKIT_TEST_CRDS``. The CRDs are upstream files, so the repository does not carry them;
without them the test is skipped, saying so (tests/deploy/test_export.py validates these
objects' pod parts against Kubernetes' own schemas either way).

Each object is validated by the CRD's OpenAPI schema and, stricter than the API server
(which prunes unknown fields silently), every field written must be one the schema names.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from test_export import IMAGE, documents, run

FOLDER = Path(os.environ.get("ENVKIT_TEST_CRDS", "/nonexistent"))
pytestmark = pytest.mark.skipif(
    not FOLDER.is_dir(), reason="no CRD folder: set ENVKIT_TEST_CRDS (see the module's docstring)"
)


def schema(file: str, version: str) -> dict[str, Any]:
    crd = next(d for d in yaml.safe_load_all((FOLDER / file).read_text()) if d)
    found = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    result: dict[str, Any] = found["schema"]["openAPIV3Schema"]
    return result


def unknown(obj: Any, spec: dict[str, Any], where: tuple[str, ...] = ()) -> list[str]:
    if isinstance(obj, list) and "items" in spec:
        return [u for i, v in enumerate(obj) for u in unknown(v, spec["items"], (*where, str(i)))]
    if not isinstance(obj, dict) or where[-1:] == ("metadata",):
        return []
    if spec.get("x-kubernetes-preserve-unknown-fields") and "properties" not in spec:
        return []
    props, more = spec.get("properties", {}), spec.get("additionalProperties")
    out = []
    for key, value in obj.items():
        if key in props:
            out += unknown(value, props[key], (*where, key))
        elif isinstance(more, dict):
            out += unknown(value, more, (*where, key))
        elif not (where == () and key in ("apiVersion", "kind", "metadata")):
            out.append(".".join((*where, key)))
    return out


def conforms(obj: dict[str, Any], file: str, version: str) -> None:
    found = schema(file, version)
    jsonschema.Draft4Validator(found).validate(obj)
    assert unknown(obj, found) == []


def test_the_leader_worker_set_follows_its_crd(tmp_path: Path) -> None:
    data = run(tmp_path, "kubernetes", "--image", IMAGE, "--nodes", "2", "--gpus-per-node", "2")
    lws = documents(Path(data["files"][0]["path"]))[0]
    conforms(lws, "leaderworkerset.x-k8s.io_leaderworkersets.yaml", "v1")


def test_the_kserve_objects_follow_their_crds(tmp_path: Path) -> None:
    data = run(tmp_path, "kserve", "--image", IMAGE)
    runtime, service = documents(Path(data["files"][0]["path"]))
    conforms(runtime, "serving.kserve.io_servingruntimes.yaml", "v1alpha1")
    conforms(service, "serving.kserve.io_inferenceservices.yaml", "v1beta1")
