"""``vllm serve``'s argument parser read from vLLM's source with ``ast``, never imported.

Two shapes are read. Old releases call ``parser.add_argument("--flag", action=..., nargs=...)``
in ``EngineArgs.add_cli_args`` and the frontend's ``make_arg_parser``. Newer ones take the
keyword arguments from a config dataclass (``model_kwargs = get_kwargs(ModelConfig)`` then
``add_argument("--max-model-len", **model_kwargs["max_model_len"])``), or add every field of a
dataclass in a loop (``for key, value in get_kwargs(FrontendArgs).items(): add_argument(
*value.pop("flags", []), f"--{key.replace('_', '-')}", **value)``): a field's annotation then
gives its arity as vLLM's ``get_kwargs`` does (a bool is ``--x``/``--no-x``, a list takes one
or more values, ``bool | str | None`` an optional one). What cannot be read is reported, never
guessed: a call whose flag is computed some other way makes the release unreadable.

Arity is a string: ``"0"`` (a switch), ``"1"``, a count, ``"?"``, ``"*"``, ``"+"``, or ``""``
when the source does not say (the value's kwargs come from code envkit does not evaluate).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from envkit import syntax
from envkit.errors import WheelError
from envkit.releases.argfields import SWITCHES, Classes, action_name, field_arity
from envkit.releases.asttables import SourceError, module_tables

MAX_FLAGS = 5_000  # vLLM 0.33 has about 450
MAX_CALLS = 20_000  # add_argument calls and dataclass fields visited in one release
_BOOLEAN_OPTIONAL = {"BooleanOptionalAction"}
_HINT_WORDS = ("deprecat", "removed", "instead", "renamed", "replaced")
_ENTRY_FUNCTIONS = {"add_cli_args", "make_arg_parser", "subparser_init"}


@dataclass
class ParserFacts:
    """What one release's ``vllm serve`` parser accepts (built by :func:`read_parser`)."""

    flags: dict[str, str] = field(default_factory=dict)  # option string -> arity
    hints: dict[str, str] = field(default_factory=dict)  # deprecated flag -> replacement or ""
    positional_model: bool = False  # ``vllm serve MODEL`` (``model_tag``)
    model_flag: str = ""  # what ``--model`` with ``vllm serve`` does: ok | warning | error
    inverse_prefixes: bool = False  # --enable-X also gives --disable-X (EnableDisableAction)


def read_parser(
    texts: Mapping[str, str], sources: tuple[str, ...], skip: tuple[str, ...] = ()
) -> ParserFacts:
    """The parser of ``vllm serve`` from ``texts`` (path -> source): ``sources`` are the files
    whose ``add_cli_args``/``make_arg_parser``/``subparser_init`` build it; the other texts
    supply config dataclasses and vLLM's ArgumentParser. Raises WheelError when a flag is
    built in a way envkit cannot read, or no flag is found."""
    trees = {path: _parse(text, path) for path, text in texts.items() if path not in skip}
    classes = Classes(trees)
    facts = ParserFacts()
    budget = [MAX_CALLS]
    called = {
        node.func.value.id
        for path in sources
        if path in trees
        for node in ast.walk(trees[path])
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _ENTRY_FUNCTIONS
        and isinstance(node.func.value, ast.Name)
    }
    for path in sources:
        if path not in trees:
            continue
        constants = _string_constants(texts[path], path)
        for func, owner in _entry_functions(trees[path]):
            # a classmethod's cls: each class that calls it (FrontendArgs.add_cli_args)
            bound = sorted(classes.subclasses(owner) & called) if owner else []
            for cls in bound or [owner]:
                _read_function(func, cls, classes, constants, facts, budget, path)
    if not facts.flags:
        raise WheelError(
            "envkit found no vllm serve flag in " + ", ".join(sources) + ".",
            "This vLLM release builds its argument parser in a way envkit does not read.",
        )
    facts.flags.setdefault("-h", "0")  # argparse's own help
    facts.flags.setdefault("--help", "0")
    for tree in trees.values():
        _read_argument_parser(tree, facts)
    return facts


def _parse(text: str, path: str) -> ast.Module:
    try:
        return syntax.parse_module(text, path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise WheelError(f"{path} is not Python envkit can parse: {exc}") from None


def _string_constants(text: str, path: str) -> dict[str, str]:
    try:
        tables = module_tables(text, filename=path)
    except SourceError as exc:
        raise WheelError(str(exc)) from None
    return {k: v for k, v in tables.items() if isinstance(v, str)}


def _entry_functions(tree: ast.Module) -> Iterator[tuple[ast.FunctionDef, str]]:
    """The functions that build the parser, each with the class it is a method of ("")."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in _ENTRY_FUNCTIONS:
            yield node, ""
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef) and sub.name in _ENTRY_FUNCTIONS:
                    yield sub, node.name


def _read_function(
    func: ast.FunctionDef,
    owner: str,
    classes: Classes,
    constants: Mapping[str, str],
    facts: ParserFacts,
    budget: list[int],
    path: str,
) -> None:
    kwargs_of: dict[str, str] = {}  # local name -> dataclass its get_kwargs() came from
    loops: dict[str, str] = {}  # loop variable (the field name) -> dataclass
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            cls = _get_kwargs_class(value, kwargs_of, owner)
            if isinstance(target, ast.Name) and cls:
                kwargs_of[target.id] = cls
        elif isinstance(node, ast.For):
            cls = _items_class(node.iter, kwargs_of, owner)
            if cls and isinstance(node.target, ast.Tuple) and node.target.elts:
                first = node.target.elts[0]
                if isinstance(first, ast.Name):
                    loops[first.id] = cls
    for node in ast.walk(func):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            continue
        budget[0] -= 1
        if budget[0] < 0:
            raise WheelError(f"{path}: more add_argument calls than envkit reads ({MAX_CALLS:,}).")
        _read_call(node, classes, constants, kwargs_of, loops, facts, budget, path)


def _get_kwargs_class(value: ast.expr, kwargs_of: Mapping[str, str], owner: str) -> str:
    """``get_kwargs(Cls)`` (or a copy of a known one) -> ``Cls`` (``cls``: ``owner``)."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name | ast.Attribute):
        name = value.func.id if isinstance(value.func, ast.Name) else value.func.attr
        if name == "get_kwargs" and value.args and isinstance(value.args[0], ast.Name):
            arg = value.args[0].id
            return owner if arg == "cls" and owner else arg
        if name == "_customize_cli_kwargs" and value.args:
            first = value.args[0]
            return kwargs_of.get(first.id, "") if isinstance(first, ast.Name) else ""
    return ""


def _items_class(node: ast.expr, kwargs_of: Mapping[str, str], owner: str) -> str:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "items"
    ):
        inner = node.func.value
        if isinstance(inner, ast.Name):
            return kwargs_of.get(inner.id, "")
        return _get_kwargs_class(inner, kwargs_of, owner)
    return ""


def _read_call(
    call: ast.Call,
    classes: Classes,
    constants: Mapping[str, str],
    kwargs_of: Mapping[str, str],
    loops: Mapping[str, str],
    facts: ParserFacts,
    budget: list[int],
    path: str,
) -> None:
    options, generated = _names(call, loops, facts, path)
    if generated:
        fields = classes.fields(generated)
        if fields is None:
            raise WheelError(
                f"{path}:{call.lineno}: the dataclass {generated} is not in the wheel."
            )
        overrides = classes.overrides(generated)
        for name, annotation in fields.items():
            budget[0] -= 1
            arity = overrides.get(name) or field_arity(annotation, classes)
            _add(facts, [f"--{name.replace('_', '-')}"], arity, arity == "bool")
        return
    if not options:
        return
    arity, boolean = _call_arity(call, classes, kwargs_of)
    _add(facts, options, arity, boolean)
    hint = _hint(call, options, constants)
    if hint is not None:
        for option in options:
            facts.hints[option] = hint


def _names(
    call: ast.Call, loops: Mapping[str, str], facts: ParserFacts, path: str
) -> tuple[list[str], str]:
    """The option strings of one add_argument call, and the dataclass whose every field it
    adds (``f"--{key...}"`` in a loop), else ""."""
    options: list[str] = []
    generated = ""
    for arg in call.args:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            if arg.value.startswith("-"):
                options.append(arg.value)
            elif arg.value in ("model_tag", "model"):
                facts.positional_model = True
        elif isinstance(arg, ast.JoinedStr) and _loop_name(arg, loops):
            generated = loops[_loop_name(arg, loops)]
        elif not isinstance(arg, ast.Starred):  # *flags a dataclass declares: the field's own
            raise WheelError(
                f"{path}:{call.lineno}: an add_argument call whose flag is computed "
                f"({ast.unparse(arg)[:80]}); envkit does not evaluate it.",
                "This vLLM release builds its argument parser in a way envkit does not read.",
            )
    return options, generated


def _loop_name(node: ast.JoinedStr, loops: Mapping[str, str]) -> str:
    """``f"--{key.replace('_', '-')}"`` -> ``key`` when ``key`` walks a dataclass's fields."""
    if len(node.values) != 2:
        return ""
    head, value = node.values
    if not (isinstance(head, ast.Constant) and head.value == "--"):
        return ""
    if not isinstance(value, ast.FormattedValue):
        return ""
    inner = value.value
    if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute):
        inner = inner.func.value
    return inner.id if isinstance(inner, ast.Name) and inner.id in loops else ""


def _add(facts: ParserFacts, options: list[str], arity: str, boolean: bool) -> None:
    names = list(options)
    if boolean:  # argparse.BooleanOptionalAction: --x and --no-x
        names += [f"--no-{o[2:]}" for o in options if o.startswith("--")]
    for name in names:
        facts.flags[name] = "0" if boolean else arity
    if len(facts.flags) > MAX_FLAGS:
        raise WheelError(f"more vllm serve flags than envkit reads ({MAX_FLAGS:,}).")


def _call_arity(call: ast.Call, classes: Classes, kwargs_of: Mapping[str, str]) -> tuple[str, bool]:
    """(arity, is BooleanOptionalAction) of one add_argument call."""
    action, nargs = None, None
    for keyword in call.keywords:
        if keyword.arg == "action":
            action = keyword.value
        elif keyword.arg == "nargs":
            nargs = keyword.value
        elif keyword.arg is None:  # **model_kwargs["max_model_len"]
            if action is not None or nargs is not None:
                return "", False
            arity = _spread_arity(keyword.value, classes, kwargs_of)
            return ("0", True) if arity == "bool" else (arity, False)
    if action is not None:
        name = action_name(action)
        if name in _BOOLEAN_OPTIONAL:
            return "0", True
        if name in SWITCHES:
            return "0", False
    if isinstance(nargs, ast.Constant) and isinstance(nargs.value, str | int):
        return str(nargs.value), False
    if nargs is not None:
        return "", False
    return ("1" if action is None or action_name(action) in ("store", "append") else ""), False


def _spread_arity(spread: ast.expr, classes: Classes, kwargs_of: Mapping[str, str]) -> str:
    """The arity ``**model_kwargs["field"]`` gives (or ``**{**kwargs["f"], "default": x}``)."""
    if isinstance(spread, ast.Dict):
        keys = {k.value for k in spread.keys if isinstance(k, ast.Constant)}
        inner = [v for k, v in zip(spread.keys, spread.values, strict=True) if k is None]
        if len(inner) != 1 or keys & {"action", "nargs", "type"}:
            return ""
        spread = inner[0]
    if not (
        isinstance(spread, ast.Subscript)
        and isinstance(spread.value, ast.Name)
        and spread.value.id in kwargs_of
        and isinstance(spread.slice, ast.Constant)
        and isinstance(spread.slice.value, str)
    ):
        return ""
    fields = classes.fields(kwargs_of[spread.value.id]) or {}
    annotation = fields.get(spread.slice.value)
    return "" if annotation is None else field_arity(annotation, classes)


def _hint(call: ast.Call, options: list[str], constants: Mapping[str, str]) -> str | None:
    """For a flag its help calls deprecated: the other flag the help names ("" for none);
    None for a flag not deprecated."""
    deprecated = any(
        k.arg == "deprecated" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in call.keywords
    )
    help_text = ""
    for keyword in call.keywords:
        if keyword.arg == "help":
            help_text = _text_of(keyword.value, constants)
    lowered = help_text.lower()
    if not deprecated and not ("deprecat" in lowered and any(w in lowered for w in _HINT_WORDS)):
        return None
    for word in help_text.replace("`", " ").replace("'", " ").replace('"', " ").split():
        word = word.strip(".,;:()[]").split("=")[0]
        if word.startswith("--") and len(word) > 2 and word not in options:
            return word
    return ""


def _text_of(node: ast.expr, constants: Mapping[str, str]) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id, "")
    if isinstance(node, ast.JoinedStr):
        return "".join(_text_of(v, constants) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text_of(node.left, constants) + _text_of(node.right, constants)
    return ""


def _read_argument_parser(tree: ast.Module, facts: ParserFacts) -> None:
    """vLLM's FlexibleArgumentParser: whether ``--model`` with ``vllm serve`` is refused or
    warned about, and whether --enable-X/--disable-X pairs are registered."""
    for node in tree.body:
        if not (isinstance(node, ast.ClassDef) and node.name == "FlexibleArgumentParser"):
            continue
        for sub in ast.walk(node):
            _parser_fact(sub, facts)
    if facts.inverse_prefixes:
        for name, arity in list(facts.flags.items()):
            if arity == "0" and not name.startswith("--no-"):
                for prefix, inverse in (("--enable-", "--disable-"), ("--disable-", "--enable-")):
                    if name.startswith(prefix) and f"--no-{name[2:]}" in facts.flags:
                        facts.flags.setdefault(inverse + name[len(prefix) :], "0")


def _parser_fact(node: ast.AST, facts: ParserFacts) -> None:
    if isinstance(node, ast.Raise) and "--model" in ast.unparse(node):
        if "vllm serve" in ast.unparse(node):
            facts.model_flag = "error"  # raise ValueError("With `vllm serve`, ... `--model`")
    elif (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and "--model" in node.value
        and "vllm serve" in node.value
        and not facts.model_flag
    ):
        facts.model_flag = "warning"  # logger.warning("With `vllm serve`, ... `--model`")
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "register"
        and any(isinstance(a, ast.Name) and a.id == "EnableDisableAction" for a in node.args)
    ):
        facts.inverse_prefixes = True
