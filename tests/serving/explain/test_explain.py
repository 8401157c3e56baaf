"""envkit explain: one small log per code (in the shapes vLLM really prints, written here),
the three field reports, two causes, red herrings, secrets, the command line."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from bootlogs import FAILURES, NOISE, log, preamble
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.errors import BadInput
from envkit.serving.explain.causes import Explanation, explain, scan_stream
from envkit.serving.explain.knowledge import GpuFacts, ProfileFacts, Tables

from helpers import envkit, valid_output

GIB = 1024**3
KNOWN = Tables(
    profile_facts=(
        ProfileFacts(
            "old-0.8.5",
            "0.8.5",
            "4.51.3",
            "2.6.0",
            "12.4",
            frozenset({"qwen2_vl"}),
            frozenset({"Qwen2VLForConditionalGeneration"}),
        ),
        ProfileFacts(
            "new-0.17.1",
            "0.17.1",
            "4.57.6",
            "2.10.0",
            "12.8",
            frozenset({"qwen2_vl", "qwen3_5"}),
            frozenset({"Qwen3_5ForConditionalGeneration"}),
        ),
    ),
    gpus={
        "rtx-2070": GpuFacts("rtx-2070", 8 * GIB, (7, 5)),
        "t4": GpuFacts("t4", 16 * GIB, (7, 5)),
    },
)


def run(text: str | bytes, knowledge: Tables = KNOWN) -> Explanation:
    data = text.encode() if isinstance(text, str) else text
    scan, stats = scan_stream(io.BytesIO(data), "test.log")
    return explain(scan, stats, knowledge, source="test.log")


@pytest.mark.parametrize("prefix", ["", "compose", "engine", "worker"])
@pytest.mark.parametrize("code", sorted(FAILURES))
def test_each_code_is_found_under_any_prefix(code: str, prefix: str) -> None:
    text = log(FAILURES[code], prefix=prefix)
    result = run(text)
    assert result.cause.code.value == code, result.cause
    assert not result.ok
    lines = text.split("\n")
    for e in result.cause.evidence:  # line numbers point at the lines shown
        assert e.text[:40] in lines[e.line - 1], (e, lines[e.line - 1])
    assert result.cause.fix or result.cause.next
    if not prefix:
        valid_output("explain", {"envkit": 1, **result.to_dict()})


def test_report_1_transformers_drift_then_the_model_type() -> None:
    first = run(log(FAILURES["transformers-too-new"], model="/home/u/models/Qwen3.5-4B"))
    assert first.cause.code.value == "transformers-too-new"
    assert any("transformers==4.51.3" in s for s in first.cause.fix)
    assert "old-0.8.5 pins transformers 4.51.3 for vLLM 0.8.5" in first.cause.details
    assert "releases up to 0.11.0 ask only for a lower bound" in first.cause.meaning
    # a release from 0.11.1 on bounds transformers from above: no drift to explain it by
    later = log(FAILURES["transformers-too-new"]).replace("version 0.8.5", "version 0.31.0")
    assert "version 0.31.0" in later
    meaning = run(later).cause.meaning
    assert meaning.startswith("vLLM 0.31.0 uses a transformers API") and "0.11.0" not in meaning
    second = run(log(FAILURES["model-type-unknown"]))
    assert second.cause.code.value == "model-type-unknown"
    assert "new-0.17.1 (vLLM 0.17.1, transformers 4.57.6)" in second.cause.fix[0]
    assert any("old-0.8.5" in d and "does not load qwen3_5" in d for d in second.cause.details)


def test_report_2_memory_arithmetic_and_the_gpu() -> None:
    body = [
        "|   0  NVIDIA GeForce RTX 2070      On  | 00000000:01:00.0 Off |",
        *FAILURES["free-memory-below-utilization"],
    ]
    result = run(log(body))
    cause = result.cause
    assert cause.code.value == "free-memory-below-utilization"
    assert cause.fix[0] == "--gpu-memory-utilization 0.86"
    assert any("6.98 / 8.00 = 0.8725" in d and "0.86" in d for d in cause.details)
    assert any("0.9 x 8.00 GiB = 7.20 GiB" in d for d in cause.details)
    assert any(d.startswith("GPU rtx-2070: 8 GiB, compute capability 7.5") for d in cause.details)
    assert any("--gpu rtx-2070 --free 6.98GiB" in n for n in cause.next)


def test_report_3_stall_at_encoder_profiling_gives_max_pixels() -> None:
    lines = [
        *preamble("0.17.1", "/root/model/Qwen3.5-2B"),
        "INFO 05-12 10:01:02 [non_default.py:1] non-default args: {'model_tag': "
        "'/root/model/Qwen3.5-2B', 'max_model_len': 10000, 'gpu_memory_utilization': 0.4, "
        "'mm_encoder_tp_mode': 'data', 'mm_processor_cache_type': 'shm'}",
        "INFO 05-12 10:01:03 [model.py:631] Resolved architecture: Qwen3_5ForConditionalGeneration",
        "INFO 05-12 10:01:05 [default_loader.py:262] Loading weights took 2.40 seconds",
        "INFO 05-12 10:01:05 [gpu_model_runner.py:1] Model loading took 4.25 GiB and 2.9 seconds",
        "INFO 05-12 10:01:06 [gpu_model_runner.py:2] Encoder cache will be initialized with a "
        "budget of 16384 tokens, and profiled with 1 image items of the maximum feature size.",
        *NOISE[:1],
    ]
    result = run("\n".join(lines))
    assert result.status.value == "stalled"
    cause = result.cause
    assert cause.code.value == "encoder-cache-profiling"
    assert cause.fix[0] == "--mm-processor-kwargs '{\"max_pixels\": 524288}'"
    assert any(
        "16384 tokens x 1024 = 16,777,216 pixels, about 4096 x 4096" in d for d in cause.details
    )
    assert any("512 x 32 x 32 = 524288" in d for d in cause.details)
    assert any("architecture Qwen3_5ForConditionalGeneration" in d for d in cause.details)
    assert "drop --mm-encoder-tp-mode data on one GPU" in cause.fix
    # the same line followed by progress is no stall
    moved = run(
        "\n".join(
            [
                *lines,
                "INFO 05-12 10:01:09 [kv_cache_utils.py:1] GPU KV cache size: 41,000 tokens",
                "INFO:     Application startup complete.",
            ]
        )
    )
    assert moved.ok and moved.cause.code.value == "none"


def test_the_wrapper_alone_and_unknown_failures() -> None:
    alone = run(log([]))
    assert alone.cause.code.value == "engine-core-failed"
    assert "Failed core proc(s)" in alone.cause.evidence[-1].text or alone.cause.evidence
    unknown = run(log(["ZeroDivisionError: division by zero"], wrap=False))
    assert unknown.cause.code.value == "unknown"
    assert any("ZeroDivisionError" in e.text for e in unknown.cause.evidence)


def test_two_causes_the_earliest_first_and_the_other_also() -> None:
    result = run(log([*FAILURES["xet-unauthorized"], *FAILURES["free-memory-below-utilization"]]))
    assert result.cause.code.value == "xet-unauthorized"
    assert [c.code.value for c in result.also] == ["free-memory-below-utilization"]


def test_red_herring_warnings_are_not_causes() -> None:
    herrings = [
        "WARNING 05-12 10:01:04 [parallel.py:750] Address already in use. Retrying with a new "
        "port.",
        "WARNING 05-12 10:01:04 [utils.py:1] CUDA out of memory would be reported here; it was not",
        "WARNING 05-12 10:01:04 [interface.py:314] Using 'pin_memory=False' as WSL is detected.",
    ]
    healthy = run("\n".join([*preamble(), *herrings, "INFO:     Application startup complete."]))
    assert healthy.ok and healthy.cause.code.value == "none" and healthy.also == ()
    failing = run(log([*herrings, *FAILURES["kv-cache-too-small"]]))
    assert failing.cause.code.value == "kv-cache-too-small"
    assert failing.also == ()
    assert "--max-model-len 7840" in failing.cause.fix[0]
    # the length vLLM computed with, as its message says, over the args' 4096 in the preamble
    assert any("max_model_len 32768: 3.50 GiB" in d for d in failing.cause.details)


def test_a_failure_after_the_start_is_a_failure(tmp_path: Path) -> None:
    result = run("\n".join(["INFO:     Application startup complete.", *FAILURES["cuda-oom"]]))
    assert not result.ok and result.cause.code.value == "cuda-oom"


def test_secrets_are_masked_in_text_and_json(tmp_path: Path) -> None:
    token, key = "hf_AbCdEfGhIjKlMnOpQrStUv", "sk-live-0123456789abcdef"
    body = [
        f"$ HF_TOKEN={token} vllm serve /models/m --api-key {key} --port 8000",
        f"INFO 05-12 10:01:02 [utils.py:1] non-default args: {{'api_key': ['{key}']}}",
        f"ERROR 05-12 10:01:05 [hub.py:1] 401 Client Error: Unauthorized for url: "
        f"https://user:{key}@huggingface.co/org/m/resolve/main/config.json "
        f"(Authorization: Bearer {token})",
    ]
    path = tmp_path / "secret.log"
    path.write_text(log(body))
    for args in (("explain", str(path)), ("explain", str(path), "--json")):
        res = envkit(*args, cwd=tmp_path)
        assert res.code == 1
        assert token not in res.out + res.err and key not in res.out + res.err
        assert "hf-unauthorized" in res.out


def test_utf16_from_powershell_is_read(tmp_path: Path) -> None:
    result = run(log(FAILURES["bf16-unsupported"]).encode("utf-16"))
    assert result.cause.code.value == "bf16-unsupported"
    assert any(d.startswith("GPU t4: 16 GiB") for d in result.cause.details)


def test_a_huge_line_is_cut_not_held(tmp_path: Path) -> None:
    path = tmp_path / "long.log"
    with path.open("wb") as f:
        f.write(b"INFO 05-12 10:01:01 [x.py:1] " + b"y" * (20 << 20) + b"\n")
        f.write(log(FAILURES["cuda-oom"]).encode())
    with path.open("rb") as f:
        scan, stats = scan_stream(f, "long.log")
    assert stats.cut == 1
    result = explain(scan, stats, KNOWN)
    assert result.cause.code.value == "cuda-oom"
    assert result.cause.line == 1 + len(preamble()) + len(NOISE) + 1 + 1


def test_an_internal_port_is_not_the_servers_port() -> None:
    body = [
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any "
        "local network address. port: 41235, useIpv6: false, code: -98, name: EADDRINUSE, "
        "message: address already in use",
    ]
    cause = run(log(body)).cause
    assert cause.code.value == "port-in-use"
    assert "internal port" in cause.summary and "41235" in cause.summary
    assert "8000" not in cause.summary + " ".join(cause.fix)
    unnamed = run(log(["OSError: [Errno 98] Address already in use"])).cause
    assert unnamed.summary == "port 8000 (the --port the log's arguments show) is already in use"
    bare = run("OSError: [Errno 98] Address already in use\n").cause
    assert "does not name" in bare.summary and "8000" not in bare.summary + " ".join(bare.next)


def test_a_suggested_port_is_free_on_loopback() -> None:
    import socket

    from envkit.serving.explain.fixcontext import free_port_after, port_free

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        assert not port_free(taken)
        found = free_port_after(taken - 1)
        assert found is not None and found != taken and port_free(found)
    assert not port_free(0) and not port_free(70000)


def test_an_oom_with_nothing_free_before_the_weights_is_another_process() -> None:
    body = [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a "
        "total capacity of 7.79 GiB of which 0 bytes is free.",
    ]
    cause = run(log(body)).cause
    assert cause.code.value == "gpu-occupied"
    assert "max-model-len" not in " ".join(cause.fix) and "nvidia-smi" in cause.fix[0]
    assert any("--gpu-memory 7.79GiB" in n for n in cause.next)
    loaded = run(
        log(["INFO 05-12 10:01:05 [r.py:1] Model loading took 6.2 GiB and 3 s", *body])
    ).cause
    assert loaded.code.value == "cuda-oom"


def test_a_model_type_the_process_loaded_is_not_unknown_to_transformers() -> None:
    before = [
        "INFO 05-12 10:01:03 [model.py:1] Resolved architecture: Qwen3_5ForConditionalGeneration",
        "INFO 05-12 10:01:05 [r.py:1] Model loading took 4.2 GiB and 3 s",
    ]
    cause = run(log([*before, *FAILURES["model-type-unknown"]])).cause
    assert cause.code.value == "model-type-loaded"
    assert "Qwen3_5ForConditionalGeneration" in cause.summary
    assert run(log(FAILURES["model-type-unknown"])).cause.code.value == "model-type-unknown"


def test_a_log_that_ends_mid_boot_is_incomplete_and_exits_0(tmp_path: Path) -> None:
    lines = [*preamble(), *NOISE]
    result = run("\n".join(lines) + "\n")
    assert result.status.value == "incomplete" and result.exit_ok and not result.ok
    assert result.cause.code.value == "log-incomplete"
    assert "Starting to load model" in result.cause.summary
    path = tmp_path / "mid.log"
    path.write_text("\n".join(lines) + "\n")
    res = envkit("explain", str(path), cwd=tmp_path)
    assert res.code == 0 and "ends before vLLM started or failed" in res.out
    valid_output("explain", {"envkit": 1, **result.to_dict()})


def test_a_client_applications_log_is_not_vllms() -> None:
    text = (
        "2025-05-12 10:01:02,123 myapp.client ERROR request failed\n"
        "Traceback (most recent call last):\n"
        "openai.APIConnectionError: Connection error.\n"
    )
    result = run(text)
    assert result.status.value == "not-vllm" and result.cause.code.value == "not-a-vllm-log"
    assert not result.exit_ok


def test_killed_and_a_sigkilled_engine_are_the_hosts_oom_killer() -> None:
    assert run(log(["Killed"], wrap=False)).cause.code.value == "host-oom"
    bash = "bash: line 1:  4242 Killed                  vllm serve /models/m"
    assert run(log([bash], wrap=False)).cause.code.value == "host-oom"
    assert run(log(["Error: exited with Exit Code: 137"])).cause.code.value == "host-oom"
    wrapper = [
        "RuntimeError: Engine core initialization failed. See root cause above. "
        "Failed core proc(s): {'EngineCore_DP0': -9}"
    ]
    assert run(log(wrapper, wrap=False)).cause.code.value == "host-oom"


def test_remote_code_prompt_says_whether_trust_was_set() -> None:
    plain = run(log(FAILURES["remote-code-prompt"])).cause
    assert "--trust-remote-code" in plain.fix[0]
    assert "not in the recorded arguments" in plain.details[0]
    with_value_error = run(
        log(["ValueError: " + FAILURES["remote-code-prompt"][0]], wrap=False)
    ).cause
    assert with_value_error.code.value == "remote-code-prompt"
    lines = log(FAILURES["remote-code-prompt"]).replace(
        "max_model_len=4096)", "max_model_len=4096, trust_remote_code=True)"
    )
    trusted = run(lines).cause
    assert "although trust_remote_code was set" in trusted.summary


def test_nccl_shm_only_as_warnings_and_cupy() -> None:
    warn = [
        "node1:77:91 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend "
        "/dev/shm/nccl-Xy12 to 9637892 bytes",
        "RuntimeError: engine stopped",
    ]
    assert run(log(warn)).cause.code.value == "shm-too-small"
    cupy = [
        "cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_SYSTEM_ERROR: unhandled system error"
    ]
    assert run(log(cupy)).cause.code.value == "nccl-error"


def test_the_transformers_fix_without_a_version_says_the_bound() -> None:
    text = log(FAILURES["transformers-too-new"]).replace("vLLM API server version 0.8.5", "")
    cause = run(text).cause
    assert any("'transformers<5'" in s for s in cause.fix), cause.fix
    assert not any("pins transformers" in d for d in cause.details)


def test_fixes_name_the_profile_venv_gpu_and_what_serve_passed() -> None:
    scan, stats = scan_stream(io.BytesIO(log(FAILURES["config-conflict"]).encode()), "t.log")
    made = explain(scan, stats, KNOWN, profile="qwen2-vl", venv="/srv/venv-x")
    assert "envkit build qwen2-vl --venv /srv/venv-x" in " ".join(made.cause.fix)
    stall = [
        *preamble("0.17.1", "/root/model/Qwen3.5-2B"),
        "INFO 05-12 10:01:03 [model.py:631] Resolved architecture: Qwen3_5ForConditionalGeneration",
        "INFO 05-12 10:01:06 [gpu_model_runner.py:2] Encoder cache will be initialized with a "
        "budget of 16384 tokens, and profiled with 1 image items of the maximum feature size.",
    ]
    scan, stats = scan_stream(io.BytesIO("\n".join(stall).encode()), "t.log")
    passed = ("--mm-processor-kwargs", '{"max_pixels": 524288}')
    made = explain(scan, stats, KNOWN, profile="qwen3.5", gpu="rtx-2070", passed=passed)
    fix = made.cause.fix
    assert "max_pixels 524288 was given and did not take effect" in fix[0]
    assert not any(f.startswith("--mm-processor-kwargs") for f in fix)
    assert any("--limit-mm-per-prompt" in f for f in fix)
    assert any("--gpu rtx-2070" in n for n in made.cause.next)


def test_an_error_after_a_long_carriage_return_run_is_found(tmp_path: Path) -> None:
    bar = "Loading shards:  50% Completed | 1/2 [00:01<00:01,  1.02it/s]"
    same_line = "\r".join([bar] * 200) + (
        "\rRuntimeError: CUDA error: no kernel image is available for execution on the device"
    )
    for run_length in (len(same_line), 1 << 20):
        long_bar = "\r".join([bar] * (run_length // len(bar) + 1))
        text = "\n".join([*preamble(), long_bar + "\r" + FAILURES["cuda-oom"][0], "tail"])
        result = run(text + "\n")
        assert result.cause.code.value == "cuda-oom", run_length
        assert result.cause.line == len(preamble()) + 1
    assert run("\n".join([*preamble(), same_line])).cause.code.value == "no-kernel-image"


def test_a_long_evidence_line_is_whole_in_json_and_its_cut_said_in_text(tmp_path: Path) -> None:
    long = FAILURES["cuda-oom"][0] + " detail" * 300
    path = tmp_path / "long.log"
    path.write_text(log([long]))
    data = envkit("explain", str(path), "--json", cwd=tmp_path).json()
    assert data["cause"]["evidence"][0]["text"] == long
    valid_output("explain", data)
    out = envkit("explain", str(path), "--wide", cwd=tmp_path).out
    assert f"(+{len(long) - 500} characters; --json carries the whole line)" in out


_PIECES = st.sampled_from(
    [
        *(line for body in FAILURES.values() for line in body),
        *NOISE,
        *preamble(),
        "Killed",
        "\r",
        "\x1b[31m",
        "(EngineCore_DP0 pid=1) ",
        "vllm-1  | ",
        "port: 8000",
        "of which 0 bytes is free",
    ]
)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_PIECES, st.text(max_size=80)), max_size=30), st.binary(max_size=64))
def test_any_log_text_explains_to_valid_json(pieces: list[str], noise: bytes) -> None:
    data = ("\n".join(pieces)).encode("utf-8", "replace") + noise
    try:
        result = run(data)
    except BadInput:  # empty, binary: refused as bad input, never a crash
        return
    document = {"envkit": 1, **result.to_dict()}
    valid_output("explain", json.loads(json.dumps(document)))
    assert result.exit_ok == (result.status.value in ("healthy", "incomplete"))


def test_a_bind_error_under_get_open_ports_frames_is_internal() -> None:
    body = [
        "Traceback (most recent call last):",
        '  File "/venv/lib/python3.12/site-packages/vllm/utils.py", line 572, in get_open_port',
        '    s.bind(("", 0))',
        "OSError: [Errno 98] Address already in use",
    ]
    cause = run(log(body)).cause
    assert cause.code.value == "port-in-use" and "internal port" in cause.summary
    assert "8000" not in cause.summary
    jit = run(log(["/bin/sh: 1: /usr/local/cuda/bin/nvcc: not found"])).cause
    assert jit.code.value == "flashinfer-jit"


def test_the_transformers_fix_names_the_project_profile_and_its_venv(tmp_path: Path) -> None:
    scan, stats = scan_stream(io.BytesIO(log(FAILURES["transformers-too-new"]).encode()), "t")
    made = explain(scan, stats, KNOWN, profile="qwen2-vl", venv="/srv/x")
    fix = " ".join(made.cause.fix)
    assert "uv pip install --python /srv/x 'vllm==0.8.5' 'transformers==4.51.3'" in fix
    assert "envkit build qwen2-vl --venv /srv/x" in fix and "old-0.8.5 --venv" not in fix
