"""envkit explain --diff on pairs of WSL2-like boot logs written here (report 2's question:
is VLLM_WSL2_ENABLE_PIN_MEMORY read at all?)."""

from __future__ import annotations

from pathlib import Path

from bootlogs import FAILURES, log

from envkit.serving.explain.knowledge import Tables
from envkit.serving.explain.logdiff import diff

from helpers import envkit, valid_output


def EMPTY(folder: Path) -> dict[str, str]:
    """No profiles: the CLI runs without reading the shipped ones (a second each)."""
    (folder / "no-profiles").mkdir(exist_ok=True)
    return {"ENVKIT_ENVS": str(folder / "no-profiles")}


WSL = "WARNING 05-12 10:01:04 [interface.py:314] Using 'pin_memory=False' as WSL is detected."


def wsl_log(version: str, pin: str | None, body: list[str]) -> str:
    env = [f"VLLM_WSL2_ENABLE_PIN_MEMORY={pin}"] if pin is not None else []
    return "\n".join(
        [
            "HF_HUB_DISABLE_XET=1",
            *env,
            "$ vllm serve Qwen/Qwen2.5-3B-Instruct --dtype float16 --gpu-memory-utilization 0.9"
            " --max-model-len 4096",
            log(body, version=version),
        ]
    )


def test_a_switch_vllm_never_reads_takes_the_same_path(tmp_path: Path) -> None:
    on, off = tmp_path / "on.log", tmp_path / "off.log"
    on.write_text(wsl_log("0.8.5", "1", [WSL, *FAILURES["uva-unavailable"][1:]]))
    off.write_text(wsl_log("0.8.5", None, [WSL, *FAILURES["uva-unavailable"][1:]]))
    d = diff(str(on), str(off), Tables())
    assert [(c.name, c.a, c.b) for c in d.changed_env] == [
        ("VLLM_WSL2_ENABLE_PIN_MEMORY", "1", None)
    ]
    assert d.changed_args == ()
    (ack,) = d.acknowledged
    assert ack.verdict == "not-acknowledged"
    assert "vLLM 0.8.5 does not read VLLM_WSL2_ENABLE_PIN_MEMORY" in ack.note
    assert d.same_failure and d.cause_a.code.value == "uva-unavailable"
    res = envkit(
        "explain", "--diff", str(on), str(off), "--json", cwd=tmp_path, env=EMPTY(tmp_path)
    )
    res.assert_ok()
    data = res.json()
    assert data["same_failure"] is True and data["acknowledged"][0]["verdict"] == "not-acknowledged"
    valid_output("explain-diff", data)


def test_a_switch_that_changes_the_path_and_the_outcome(tmp_path: Path) -> None:
    on, off = tmp_path / "on.log", tmp_path / "off.log"
    started = [
        "INFO 05-12 10:01:09 [kv_cache_utils.py:1] GPU KV cache size: 20,000 tokens",
        "INFO:     Application startup complete.",
    ]
    on.write_text(
        wsl_log("0.33.0", "1", started).replace(
            "RuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {}",
            "",
        )
    )
    off.write_text(wsl_log("0.33.0", "0", [WSL, *FAILURES["uva-unavailable"][1:]]))
    d = diff(str(on), str(off), Tables())
    (ack,) = d.acknowledged
    assert ack.verdict == "path-changed"
    assert "vLLM 0.33.0 reads VLLM_WSL2_ENABLE_PIN_MEMORY" in ack.note
    assert not d.same_failure and d.cause_a.code.value in ("none", "engine-core-failed")
    assert any("pin_memory=False" in s.text for s in d.only_in_b)
    text = envkit("explain", "--diff", str(on), str(off), cwd=tmp_path, env=EMPTY(tmp_path)).out
    assert "VLLM_WSL2_ENABLE_PIN_MEMORY: 1 in a, 0 in b" in text


def test_changed_arguments_and_a_named_switch(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text(wsl_log("0.8.5", None, FAILURES["free-memory-below-utilization"]))
    b.write_text(
        wsl_log("0.8.5", None, FAILURES["free-memory-below-utilization"])
        .replace("--gpu-memory-utilization 0.9", "--gpu-memory-utilization 0.86")
        .replace("(0.9, 7.2 GiB)", "(0.86, 6.88 GiB)")
        + "WARNING 05-12 10:01:04 [interface.py:1] Unknown vLLM environment variable detected: "
        "VLLM_FOO\n"
    )
    d = diff(str(a), str(b), Tables())
    assert [(c.name, c.a, c.b) for c in d.changed_args] == [
        ("gpu_memory_utilization", "0.9", "0.86")
    ]
    assert d.acknowledged[0].verdict == "named"  # the free-memory line reads the utilisation
    assert d.same_failure


def test_diff_needs_two_files(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text("x\n")
    assert envkit("explain", "--diff", str(tmp_path / "a.log"), cwd=tmp_path).code == 2
    assert envkit("explain", "--diff", "-", str(tmp_path / "a.log"), cwd=tmp_path).code == 2
