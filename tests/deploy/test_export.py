"""envkit export: each engine's files from a shipped profile's published lock and a model
folder, every Kubernetes object validated against Kubernetes' own schemas
(kubernetes-validate), every sbatch script through shellcheck, and the refusals (a tag
alone, a flag envkit lint finds an error in, a file envkit did not write)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml
from lintindex import lint_index, lint_reads_the_local_index  # noqa: F401 (fixtures)

from envkit.results import Severity
from envkit.serving.lint import check as lint

from helpers import ROOT, envkit, output
from registry_world import MODELS

PROFILE = "vllm-0.8.5+qwen2-vl"
CELL = "py3.11-linux-x86_64-cu124"
DIGEST = "sha256:" + "ab" * 32
IMAGE = f"registry.test/team/vllm:0.8.5@{DIGEST}"
K8S = "1.33.0"  # the Kubernetes version the objects are validated against
LOCK = ROOT / "constraints" / PROFILE / f"{CELL}.txt"


def run(tmp_path: Path, engine: str, *extra: str, model: Path | None = None) -> dict[str, Any]:
    res = envkit(
        "--envs", str(ROOT / "envs"), "export", PROFILE,
        str(model or MODELS / "Qwen2-VL-2B-Instruct"), "--to", engine, "--gpu", "rtx-4090",
        "--cell", CELL, "--out", str(tmp_path / engine), "--json", *extra, cwd=tmp_path,
    )  # fmt: skip
    res.assert_ok()
    return output("export", res.out)


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def valid(obj: dict[str, Any]) -> None:
    kubernetes_validate.validate(obj, K8S, strict=True)


def pod(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def carries_the_facts(text: str, annotations: dict[str, str]) -> None:
    sha = hashlib.sha256(LOCK.read_bytes()).hexdigest()
    assert f"# lock-sha256: {sha}" in text and f"# profile: {PROFILE}" in text
    assert f"# cell: {CELL}" in text
    assert annotations["envkit/lock-sha256"] == sha
    assert annotations["envkit/verdict-model"].startswith("loadable as Qwen2VL")
    # the GPU check's answer: the pinned builds carry kernels for the card's 8.9
    assert "# verdict-gpu: kernels for compute capability 8.9 (--gpu rtx-4090)\n" in text


def test_kubernetes_writes_a_valid_deployment_and_service(tmp_path: Path) -> None:
    data = run(tmp_path, "kubernetes", "--image", IMAGE)
    assert data["kubernetes_version"] == "1.33"
    (file,) = data["files"]
    assert file["kinds"] == ["Deployment", "Service"]
    path = Path(file["path"])
    deployment, service = documents(path)
    for obj in (deployment, service):
        valid(obj)
    carries_the_facts(path.read_text(), deployment["metadata"]["annotations"])
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["image"] == IMAGE
    assert container["command"] == ["vllm", "serve"]
    assert container["args"][0] == "/models/Qwen2-VL-2B-Instruct"
    args = container["args"]
    assert args[args.index("--gpu-memory-utilization") + 1] == "0.90"
    assert args[args.index("--mm-processor-kwargs") + 1] == '{"max_pixels": 401408}'
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["HF_HUB_OFFLINE"] == "1" and env["TRANSFORMERS_OFFLINE"] == "1"
    shm = next(v for v in spec["volumes"] if v["name"] == "shm")
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "2Gi"}
    assert container["startupProbe"]["httpGet"]["path"] == "/health"
    assert container["readinessProbe"]["httpGet"]["path"] == "/v1/models"
    budget = container["startupProbe"]["failureThreshold"] * 10
    assert budget >= 180, "the startup probe waits for the model's load"
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    keys = {e["key"] for t in terms["nodeSelectorTerms"] for e in t["matchExpressions"]}
    assert {"nvidia.com/gpu.compute.major", "nvidia.com/cuda.driver.major"} <= keys
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def test_several_nodes_make_a_leader_worker_set_whose_pods_are_valid(tmp_path: Path) -> None:
    data = run(tmp_path, "kubernetes", "--image", IMAGE, "--nodes", "2", "--gpus-per-node", "4")
    path = Path(data["files"][0]["path"])
    lws, service = documents(path)
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1" and lws["kind"] == "LeaderWorkerSet"
    valid(service)
    group = lws["spec"]["leaderWorkerTemplate"]
    assert group["size"] == 2
    for role in ("leaderTemplate", "workerTemplate"):  # PodTemplateSpecs: Kubernetes' schema
        valid({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
               "template": group[role]})  # fmt: skip
    leader = group["leaderTemplate"]["spec"]["containers"][0]["args"][-1]
    assert "ray start --head" in leader and "--pipeline-parallel-size 2" in leader
    assert "--tensor-parallel-size 4" in leader
    worker = group["workerTemplate"]["spec"]["containers"][0]["args"][-1]
    assert '--address="$LWS_LEADER_ADDRESS:6379"' in worker
    assert service["spec"]["selector"]["envkit/role"] == "leader"


def test_production_stack_values_are_the_charts_keys(tmp_path: Path) -> None:
    data = run(tmp_path, "production-stack", "--image", IMAGE)
    path = Path(data["files"][0]["path"])
    assert path.name == "values.yaml"
    (values,) = documents(path)
    (spec,) = values["servingEngineSpec"]["modelSpec"]
    carries_the_facts(path.read_text(), spec["annotations"])
    assert spec["repository"] == "registry.test/team/vllm"
    assert spec["tag"] == f"0.8.5@{DIGEST}"  # the chart joins repository:tag
    assert spec["modelURL"] == "/models/Qwen2-VL-2B-Instruct"
    assert spec["requestGPU"] == 1 and spec["shmSize"] == "2Gi"
    config = spec["vllmConfig"]
    assert config["gpuMemoryUtilization"] == 0.9 and config["dtype"] == "bfloat16"
    assert config["enablePrefixCaching"] is True  # the chart writes --no-... otherwise
    assert config["extraArgs"] == ["--mm-processor-kwargs", '{"max_pixels": 401408}']
    valid(pod("p", {"containers": [{"name": "c", "image": "x"}], "affinity": {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": spec["nodeSelectorTerms"]}}}}))  # fmt: skip
    for key in ("env", "extraVolumes"):
        assert spec[key]
    assert values["servingEngineSpec"]["startupProbe"]["httpGet"]["path"] == "/health"


def test_kserve_objects_carry_the_same_facts(tmp_path: Path) -> None:
    data = run(tmp_path, "kserve", "--image", IMAGE, "--api-key-secret", "vllm-key")
    runtime, service = documents(Path(data["files"][0]["path"]))
    assert runtime["kind"] == "ServingRuntime" and service["kind"] == "InferenceService"
    # the CRDs are not in Kubernetes' schemas: their pod parts are (containers, volumes,
    # affinity, resources), validated as a Pod
    valid(pod("runtime", {"containers": runtime["spec"]["containers"],
                          "volumes": runtime["spec"]["volumes"]}))  # fmt: skip
    predictor = service["spec"]["predictor"]
    model = predictor["model"]
    container = {"name": "kserve-container", "image": IMAGE, "resources": model["resources"]}
    valid(pod("predictor", {"affinity": predictor["affinity"], "containers": [container]}))
    assert model["runtime"] == runtime["metadata"]["name"]
    assert model["storageUri"].startswith("pvc://")
    container = runtime["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["VLLM_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "vllm-key"
    assert "value" not in env["VLLM_API_KEY"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"  # /v1 needs the key
    assert service["metadata"]["annotations"]["envkit/lock-sha256"] == data["lock"]["sha256"]


needs_shellcheck = pytest.mark.skipif(
    shutil.which("shellcheck") is None,
    reason="shellcheck is not installed (apt-get install shellcheck)",
)


@needs_shellcheck
@pytest.mark.parametrize(
    "extra",
    [
        ("--image", IMAGE),
        ("--venv", "/shared/venvs/vllm 0.8.5"),
        ("--image", IMAGE, "--nodes", "3", "--gpus-per-node", "8"),
        ("--venv", "/shared/venv", "--nodes", "2"),
    ],
)
def test_sbatch_scripts_pass_shellcheck(tmp_path: Path, extra: tuple[str, ...]) -> None:
    data = run(tmp_path, "slurm", *extra)
    path = Path(data["files"][0]["path"])
    text = path.read_text()
    done = subprocess.run(["shellcheck", "-s", "bash", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
    assert text.startswith("#!/bin/bash\n#SBATCH --job-name=")
    carries_the_facts(text, {"envkit/lock-sha256": data["lock"]["sha256"],
                             "envkit/verdict-model": "loadable as Qwen2VL"})  # fmt: skip
    if "--nodes" in extra:
        assert "ray start --head" in text and "--pipeline-parallel-size" in text
    else:
        assert "ray start" not in text
    assert ("apptainer exec --nv docker://" in text) == ("--image" in extra)


def test_a_tag_alone_is_refused_unless_asked(tmp_path: Path) -> None:
    res = envkit(
        "--envs", str(ROOT / "envs"), "export", PROFILE, str(MODELS / "Qwen2-VL-2B-Instruct"),
        "--to", "kubernetes", "--gpu", "rtx-4090", "--cell", CELL, "--out", str(tmp_path / "o"),
        "--image", "vllm/vllm-openai:latest", cwd=tmp_path,
    )  # fmt: skip
    res.assert_fails(2, mentioning=("names a tag", "--allow-tag"))
    assert not (tmp_path / "o").exists()
    data = run(tmp_path, "kubernetes", "--image", "vllm/vllm-openai:v0.8.5", "--allow-tag")
    assert data["image"] == "vllm/vllm-openai:v0.8.5"


def test_an_engine_that_runs_an_image_needs_one(tmp_path: Path) -> None:
    res = envkit(
        "--envs", str(ROOT / "envs"), "export", PROFILE, str(MODELS / "Qwen2-VL-2B-Instruct"),
        "--to", "kserve", "--gpu", "rtx-4090", "--cell", CELL, "--out", str(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    res.assert_fails(2, mentioning=("--image REF@sha256:DIGEST", "envkit image"))
    # no --cell where two are usable: the question is the export's, not an image build's
    res = envkit(
        "--envs", str(ROOT / "envs"), "export", PROFILE, str(MODELS / "Qwen2-VL-2B-Instruct"),
        "--to", "ray", "--gpu", "rtx-4090", "--out", str(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    res.assert_fails(2, mentioning=("should the exported files' environment hold?", "--cell"))


def test_a_lint_error_refuses_the_file_naming_the_flag_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[str]] = []

    def refusing(profile: Any, args: Any, env: Any = {}, *, session: Any = None) -> Any:  # noqa: B006
        seen.append(list(args))
        finding = lint.LintFinding(
            code="unknown-flag",
            severity=Severity.ERROR,
            subject="--mm-processor-kwargs",
            message="vLLM 0.8.5 has no such flag",
            fix="drop --mm-processor-kwargs",
        )
        return lint.LintReport(vllm="0.8.5", findings=(finding,))

    monkeypatch.setattr(lint, "lint_args", refusing)
    for engine in ("kubernetes", "production-stack", "kserve", "ray", "slurm"):
        out = tmp_path / engine
        res = envkit(
            "--envs", str(ROOT / "envs"), "export", PROFILE, str(MODELS / "Qwen2-VL-2B-Instruct"),
            "--to", engine, "--gpu", "rtx-4090", "--cell", CELL, "--out", str(out),
            "--image", IMAGE, cwd=tmp_path,
        )  # fmt: skip
        res.assert_fails(1, mentioning=("--mm-processor-kwargs", "drop --mm-processor-kwargs"))
        assert not out.exists(), f"{engine}: nothing is written"
    assert all("--gpu-memory-utilization" in a or "--gpu_memory_utilization" in a for a in seen)


def test_a_file_envkit_did_not_write_is_left_alone(tmp_path: Path) -> None:
    out = tmp_path / "production-stack"
    out.mkdir()
    (out / "values.yaml").write_text("mine: true\n")
    res = envkit(
        "--envs", str(ROOT / "envs"), "export", PROFILE, str(MODELS / "Qwen2-VL-2B-Instruct"),
        "--to", "production-stack", "--gpu", "rtx-4090", "--cell", CELL, "--out", str(out),
        "--image", IMAGE, cwd=tmp_path,
    )  # fmt: skip
    res.assert_fails(2, mentioning="not written by envkit export")
    assert (out / "values.yaml").read_text() == "mine: true\n"
    run(tmp_path, "kubernetes", "--image", IMAGE)
    run(tmp_path, "kubernetes", "--image", IMAGE)  # its own file is rewritten


def test_a_gpu_given_by_its_memory_alone_leaves_the_kernels_unchecked_and_says_so(
    tmp_path: Path,
) -> None:
    res = envkit(
        "--envs", str(ROOT / "envs"), "export", PROFILE, str(MODELS / "Qwen2-VL-2B-Instruct"),
        "--to", "kubernetes", "--gpu-memory", "24GiB", "--cell", CELL, "--image", IMAGE,
        "--out", str(tmp_path), "--json", cwd=tmp_path,
    )  # fmt: skip
    path = Path(output("export", res.assert_ok().out)["files"][0]["path"])
    annotations = documents(path)[0]["metadata"]["annotations"]
    assert annotations["envkit/verdict-gpu"] == (
        "kernels not checked: no compute capability (--gpu-memory 24.00GiB)"
    )


def test_the_gpu_fact_says_not_known_where_the_kernel_table_lacks_the_builds() -> None:
    from envkit.deploy.gather import _gpu_verdict
    from envkit.gpu.arch import Capability
    from envkit.gpu.published import kerneltable, profilefit
    from envkit.gpu.target import GpuTarget
    from envkit.profiles.profile import load_profile
    from envkit.serving.plan.planning import Gpu

    profile = load_profile(ROOT / "envs" / f"{PROFILE}.toml")
    target = GpuTarget(Capability(8, 9), "NVIDIA GeForce RTX 4090")
    empty = kerneltable.KernelTable("", "", "", (), ())
    found = profilefit.on_gpu(profile, target, empty)
    assert [r.code for r in found] == ["kernels-not-known"]
    gpu = Gpu(memory=24 * 1024**3, capability=(8, 9), source="--gpu rtx-4090")
    assert _gpu_verdict(found, target, gpu) == (
        "kernels not known for compute capability 8.9 (--gpu rtx-4090)"
    )
    assert _gpu_verdict((), target, gpu) == "kernels for compute capability 8.9 (--gpu rtx-4090)"
