"""Runs inside a throwaway venv holding one vLLM x transformers pair (see compat_runtime.py):
what vLLM does at start-up, each step on its own, on CPU, without weights.

    python compat_runtime_child.py SPEC.json OUT.jsonl

SPEC names the fixture folder, the model configs, the architectures and the per-step
timeout. OUT gets one JSON line when a step starts and one when it ends (``ok``, ``error``
with the exception's type, first line and the innermost vLLM / transformers frame, or
``timeout``), so a step that hangs in C code, where the alarm cannot reach it, is still
named by the parent that kills this process. Standard library only, besides what the venv
holds: this file is copied next to SPEC and run by the venv's own interpreter.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import importlib.util
import json
import signal
import sys
import time
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

# a few sentences to train the tiny BPE on (its merges); the special tokens come on top
CORPUS = [
    "hello world, this is a tiny tokenizer for vLLM start-up checks",
    "the quick brown fox jumps over the lazy dog 0123456789",
    "<think> plain ascii text and some numbers 42 and 7 </think>",
]
QWEN2_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
WORD_SPECIAL = ["<s>", "</s>", "[UNK]", "[PAD]"]
TOKENIZERS = ("qwen2-bpe", "wordlevel")  # folder tok-KIND under the fixture folder


class StepTimeout(BaseException):
    """Raised by the alarm: a BaseException, so vLLM's own ``except Exception`` cannot eat it."""


def _alarm(_signum: int, _frame: object) -> None:
    raise StepTimeout


def _frames(exc: BaseException) -> tuple[str, str]:
    """The innermost frame inside vllm/ (where vLLM made the call: comparable to a compat
    finding's file:line) and the innermost inside vllm/ or transformers/ (where it was
    raised), each as package-relative path:line."""
    in_vllm = raised = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        path = frame.filename.replace("\\", "/")
        for package in ("/vllm/", "/transformers/"):
            if package in path:
                raised = f"{package[1:]}{path.rsplit(package, 1)[1]}:{frame.lineno}"
                if package == "/vllm/":
                    in_vllm = raised
    return in_vllm, raised


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().replace(sys.prefix, "<venv>")  # the same for every venv
    return (text.splitlines()[0] if text else "")[:300]


def _describe(exc: BaseException) -> dict[str, Any]:
    root = exc
    while root.__cause__ is not None and root.__cause__ is not root:
        root = root.__cause__
    origin, raised = _frames(exc)
    out = {"error_type": type(exc).__name__, "message": _first_line(exc)}
    out.update(origin=origin, raised_in=raised if raised != origin else "")
    if root is not exc:
        out["cause"] = f"{type(root).__name__}: {_first_line(root)}"
    return out


class Runner:
    def __init__(self, out: Path, timeout: int, skip: list[str]) -> None:
        self.out = out.open("a", encoding="utf-8")
        self.timeout = timeout
        self.skip = set(skip)  # recorded by an earlier child that was killed
        signal.signal(signal.SIGALRM, _alarm)

    def emit(self, record: dict[str, Any]) -> None:
        self.out.write(json.dumps(record, default=str) + "\n")
        self.out.flush()

    def step(self, name: str, work: Callable[[], Any]) -> None:
        if name in self.skip:
            return
        self.emit({"step": name, "event": "start"})
        start = time.monotonic()
        record: dict[str, Any] = {"step": name, "event": "end"}
        signal.alarm(self.timeout)
        try:
            result = work()
            record["status"] = "ok"
            if isinstance(result, dict):
                record["detail"] = result
        except StepTimeout:
            record.update(status="timeout", error_type="timeout", message=f"> {self.timeout} s")
        except (Exception, SystemExit) as exc:  # every failure is an outcome to record
            record.update(status="error", **_describe(exc))
        finally:
            signal.alarm(0)
        record["seconds"] = round(time.monotonic() - start, 2)
        self.emit(record)


def import_vllm() -> dict[str, Any]:
    vllm = importlib.import_module("vllm")
    declared = [
        r for r in importlib.metadata.requires("vllm") or [] if r.startswith("transformers")
    ]
    versions = {p: importlib.metadata.version(p) for p in ("transformers", "tokenizers", "torch")}
    return {"vllm": getattr(vllm, "__version__", ""), "declared": declared, **versions}


def import_config_package() -> dict[str, Any]:
    config = importlib.import_module("vllm.transformers_utils.config")
    configs = importlib.import_module("vllm.transformers_utils.configs")
    return {
        "config_module": config.__name__,
        "config_classes": len(getattr(configs, "__all__", [])),
    }


def _tokenizers_lib() -> Any:
    return importlib.import_module("tokenizers")


def write_tokenizers(root: Path, configs: dict[str, Any]) -> dict[str, Any]:
    """Two tokenizer folders in the shapes checkpoints ship: a byte-level BPE one named
    Qwen2Tokenizer (vocab.json, merges.txt, tokenizer.json) beside a qwen2 config.json, and a
    WordLevel one named PreTrainedTokenizerFast beside a llama config.json."""
    tk = _tokenizers_lib()
    bpe = root / "tok-qwen2-bpe"
    bpe.mkdir(parents=True, exist_ok=True)
    tok = tk.Tokenizer(tk.models.BPE())
    tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk.decoders.ByteLevel()
    trainer = tk.trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=QWEN2_SPECIAL,
        initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer=trainer)
    tok.save(str(bpe / "tokenizer.json"))
    tok.model.save(str(bpe))  # vocab.json and merges.txt
    ids = {t: tok.token_to_id(t) for t in QWEN2_SPECIAL}
    _write_tokenizer_config(
        bpe,
        "Qwen2Tokenizer",
        ids,
        eos="<|im_end|>",
        pad="<|endoftext|>",
        extra={"errors": "replace", "split_special_tokens": False, "bos_token": None},
    )
    (bpe / "config.json").write_text(json.dumps(configs["qwen2"]["config"]), encoding="utf-8")

    word = root / "tok-wordlevel"
    word.mkdir(parents=True, exist_ok=True)
    words = sorted({w for line in CORPUS for w in line.replace(",", " ").split()})
    vocab = {t: i for i, t in enumerate([*WORD_SPECIAL, *words])}
    wtok = tk.Tokenizer(tk.models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    wtok.pre_tokenizer = tk.pre_tokenizers.Whitespace()
    wtok.add_special_tokens(WORD_SPECIAL)
    wtok.save(str(word / "tokenizer.json"))
    _write_tokenizer_config(
        word,
        "PreTrainedTokenizerFast",
        {t: vocab[t] for t in WORD_SPECIAL},
        eos="</s>",
        pad="[PAD]",
        extra={"bos_token": "<s>", "unk_token": "[UNK]"},
    )
    (word / "config.json").write_text(json.dumps(configs["llama"]["config"]), encoding="utf-8")
    return {"folders": [bpe.name, word.name], "bpe_vocab": tok.get_vocab_size()}


def _write_tokenizer_config(
    folder: Path, cls: str, ids: dict[str, int], *, eos: str, pad: str, extra: dict[str, Any]
) -> None:
    added = {
        str(i): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for t, i in ids.items()
    }
    data = {
        "tokenizer_class": cls,
        "added_tokens_decoder": added,
        "additional_special_tokens": [t for t in ids if t not in (eos, pad)],
        "eos_token": eos,
        "pad_token": pad,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 32768,
        **extra,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(data, indent=2), encoding="utf-8")


def _tokenizer_module() -> Any:
    """Where the release keeps ``get_tokenizer``: vllm.tokenizers (0.12 on), else the older
    vllm.transformers_utils.tokenizer. Found without importing either, so a failing import
    of the one the release has is the outcome, never hidden by falling back."""
    for name in ("vllm.tokenizers", "vllm.transformers_utils.tokenizer"):
        if importlib.util.find_spec(name) is not None:
            module = importlib.import_module(name)
            if hasattr(module, "get_tokenizer"):
                return module
    raise LookupError("no get_tokenizer in vllm.tokenizers or vllm.transformers_utils.tokenizer")


def load_tokenizer(folder: str) -> dict[str, Any]:
    """vLLM's loader, then what its cached wrapper and the detokenizer read."""
    module = _tokenizer_module()
    tok = module.get_tokenizer(folder, trust_remote_code=False)
    wrapper = type(tok)
    # every property the release's cached wrapper defines (all_special_tokens_extended on
    # the releases that read it, max_token_id, ...): the values it captured at load time
    read = {}
    for name, value in list(vars(wrapper).items()):
        if isinstance(value, property):
            got = getattr(tok, name)
            read[name] = len(got) if isinstance(got, (list, tuple, dict)) else got
    ids = tok.encode("hello world")
    text = tok.decode(ids)
    tokens = tok.convert_ids_to_tokens(ids)
    tok.convert_tokens_to_string(tokens)
    return {
        "module": module.__name__,
        "class": wrapper.__name__,
        "wrapper_reads": read,
        "all_special_ids": list(tok.all_special_ids),
        "len": len(tok),
        "round_trip": text,
    }


def load_config(folder: str) -> dict[str, Any]:
    module = importlib.import_module("vllm.transformers_utils.config")
    config = module.get_config(folder, trust_remote_code=False)
    text = module.get_hf_text_config(config) if hasattr(module, "get_hf_text_config") else config
    mrope = module.uses_mrope(config) if hasattr(module, "uses_mrope") else None
    return {
        "class": type(config).__name__,
        "model_type": getattr(config, "model_type", ""),
        "architectures": list(getattr(config, "architectures", None) or []),
        "text_class": type(text).__name__,
        "uses_mrope": mrope,
    }


def _registry() -> Any:
    module = importlib.import_module("vllm.model_executor.models.registry")
    return module.ModelRegistry, module


def list_registry() -> dict[str, Any]:
    registry, _module = _registry()
    return {"architectures": sorted(registry.models)}


def load_class(arch: str) -> dict[str, Any]:
    """The registry's entry for ``arch``, its class imported (``load_model_cls``: the model
    file and everything it imports from transformers), then inspected as the registry
    inspects it (``_ModelInfo.from_model_cls``), in this process."""
    registry, module = _registry()
    entry = registry.models.get(arch)
    if entry is None:
        raise LookupError(f"{arch} is not in this vLLM's registry")
    cls = entry.load_model_cls()
    info = getattr(module, "_ModelInfo", None)
    inspected = info.from_model_cls(cls) if info is not None else None
    return {
        "class": f"{cls.__module__}.{cls.__name__}",
        "multimodal": getattr(inspected, "supports_multimodal", None),
    }


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    runner = Runner(Path(argv[2]), int(spec["timeout"]), list(spec.get("skip", [])))
    root = Path(spec["folder"])
    configs: dict[str, Any] = spec["configs"]
    runner.step("import-vllm", import_vllm)
    runner.step("config-package", import_config_package)
    runner.step("tokenizer-fixtures", partial(write_tokenizers, root, configs))
    for kind in TOKENIZERS:
        runner.step(f"tokenizer:{kind}", partial(load_tokenizer, str(root / f"tok-{kind}")))
    for model_type, item in configs.items():
        folder = root / f"config-{model_type}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(item["config"]), encoding="utf-8")
        runner.step(f"config:{model_type}", partial(load_config, str(folder)))
    classes = list(spec["classes"])
    if spec.get("all_classes"):
        # the whole registry (sorted: the same list when a later child resumes)
        runner.step("registry", list_registry)
        with contextlib.suppress(Exception):  # the registry step above recorded why
            classes += [a for a in list_registry()["architectures"] if a not in classes]
    for arch in classes:
        runner.step(f"class:{arch}", partial(load_class, arch))
    runner.emit({"event": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
