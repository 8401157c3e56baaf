"""`envkit site`'s pages: plain HTML and CSS, a little vanilla JavaScript for the search, no
server and no build step (they work from ``file://``). Every page is a pure function of the
gathered data (site/data.py): no clock, no absolute path, sorted everywhere, so the same
caches give the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from importlib import resources

from envkit.compat.check.checker import CompatReport
from envkit.gpu.needs import backend_summary
from envkit.site.data import ProfilePage, Release, Row, SiteData, State

WORDS = {
    State.LISTED: "listed",
    State.ABSENT: "not listed",
    State.DROPPED: "dropped",
    State.PLUGIN: "moved to a plugin",
    State.UNREADABLE: "registry unreadable",
}


def e(text: object) -> str:
    return escape(str(text), quote=True)


def page(title: str, body: str, *, depth: int = 0, script: bool = False) -> str:
    up = "../" * depth
    tail = f'<script src="{up}site.js"></script>\n' if script else ""
    return (
        "<!doctype html>\n<html lang=en>\n<head>\n<meta charset=utf-8>\n"
        '<meta name=viewport content="width=device-width, initial-scale=1">\n'
        f"<title>{e(title)}</title>\n"
        f'<link rel=stylesheet href="{up}site.css">\n</head>\n<body>\n'
        f'<header><a class=home href="{up}index.html">envkit</a> <nav>'
        f'<a href="{up}index.html">Model support matrix</a>'
        f'<a href="{up}compat.html">Known-bad pairs</a>'
        f'<a href="{up}profiles.html">Shipped profiles</a>'
        f'<a href="{up}sources.html">Sources</a></nav></header>\n'
        f"<main>\n{body}</main>\n{tail}</body>\n</html>\n"
    )


def index(data: SiteData) -> str:
    releases = data.releases
    newest = releases[-1] if releases else None
    families = sorted({r.family for r in data.rows})
    head = "".join(_column(r, r.version in data.shipped_releases) for r in releases)
    rows = "".join(_row(row, releases) for row in data.rows)
    options = "".join(f'<option value="{e(f)}">{e(f)}</option>' for f in families)
    listed = sum(1 for row in data.rows if State.LISTED in row.states)
    body = (
        "<h1>Which vLLM release can load which architecture</h1>\n"
        f"<p class=lead>{len(data.rows)} architectures ({listed} listed by some release) "
        f"across {len(releases)} vLLM releases, read from each release's own model registry"
        + (f", up to vLLM {e(newest.version)} (published {e(newest.uploaded)})" if newest else "")
        + ". A cell's title says more: vLLM's own transformers bound for that release (its "
        "test registry), the release it was supported until, or the plugin it moved to. "
        "Columns marked &#9733; are the releases envkit's shipped profiles pin.</p>\n"
        "<form id=filter role=search>"
        "<label>Search <input id=q type=search name=q "
        'placeholder="architecture or model type, e.g. qwen2_vl" autocomplete=off></label> '
        f'<label>Family <select id=family name=family><option value="">all</option>{options}'
        "</select></label> <output id=count></output></form>\n"
        "<p class=legend>"
        + "".join(f'<span class="k {k}"></span>{e(w)} ' for k, w in WORDS.items())
        + "</p>\n"
        f"<div class=scroll><table id=matrix>\n<thead><tr><th class=arch scope=col>Architecture"
        f"</th>{head}</tr></thead>\n<tbody>\n{rows}</tbody></table></div>\n"
    )
    return page("vLLM model support by release", body, script=True)


def _column(release: Release, shipped: bool) -> str:
    mark = "&#9733;" if shipped else ""
    title = f"vLLM {release.version}: transformers {release.transformers or 'any'}"
    if release.uploaded:
        title += f"; published {release.uploaded}"
    if shipped:
        title += "; a shipped profile pins it"
    cls = ' class="v s"' if shipped else " class=v"
    return f'<th scope=col{cls} title="{e(title)}"><span>{mark}{e(release.version)}</span></th>'


def _row(row: Row, releases: Sequence[Release]) -> str:
    search = " ".join([row.architecture.lower(), *row.model_types]).strip()
    types = f"<small>{e(', '.join(row.model_types))}</small>" if row.model_types else ""
    cells = []
    start = 0
    for end in range(1, len(releases) + 1):
        same = end < len(releases) and (row.states[end], row.notes[end]) == (
            row.states[start],
            row.notes[start],
        )
        if same:
            continue
        cells.append(_cell(row, releases, start, end))
        start = end
    return (
        f'<tr data-s="{e(search)}" data-f="{e(row.family)}">'
        f"<th scope=row class=arch>{e(row.architecture)}{types}</th>{''.join(cells)}</tr>\n"
    )


def _cell(row: Row, releases: Sequence[Release], start: int, end: int) -> str:
    state, note = row.states[start], row.notes[start]
    span = releases[start].version
    if end - start > 1:
        span += f" to {releases[end - 1].version}"
    title = f"{row.architecture}, vLLM {span}: {WORDS[state]}" + (f"; {note}" if note else "")
    colspan = f" colspan={end - start}" if end - start > 1 else ""
    mark = " b" if note and state == State.LISTED else ""
    return f'<td class="{state}{mark}"{colspan} title="{e(title)}"></td>'


def profiles_index(data: SiteData) -> str:
    items = "".join(
        f'<li><a href="profiles/{e(p.profile.name)}.html">{e(p.profile.name)}</a>: vLLM '
        f"{e(p.profile.models.vllm or '?')}, transformers "
        f"{e(p.profile.models.transformers or '?')}; driver: {e(p.driver or '?')}</li>\n"
        for p in data.profiles
    )
    return page("Shipped profiles", f"<h1>Shipped profiles</h1>\n<ul>\n{items}</ul>\n")


def profile_page(item: ProfilePage) -> str:
    p = item.profile
    pins = "".join(f"<li><code>{e(r)}</code></li>" for r in (*p.requirements, *p.constraints))
    backend = p.torch.backend or "default"
    cells = "".join(
        f"<tr><td>{e(c.cell.name)}</td><td class=st-{e(c.state)}>{e(c.state)}</td>"
        f"<td>{e(backend_summary(c.cell.backend) or '-')}</td><td>{e(c.reason)}</td></tr>\n"
        for c in item.cells
    )
    note = f"; {item.driver_note}" if item.driver_note else ""
    files = "".join(
        f'<li><a href="../constraints/{e(p.name)}/{e(f.name)}">{e(f.name)}</a></li>'
        for f in item.files
    )
    bounds = "".join(
        f"<li>{e(arch)}: {e(b.describe_tier())}{e(' (' + b.reason + ')') if b.reason else ''}</li>"
        for arch, b in sorted(p.models.transformers_bounds.items())
    )
    archs = ", ".join(e(a) for a in p.models.architectures)
    body = (
        f"<h1>{e(p.name)}</h1>\n<p class=lead>{e(p.description).replace(chr(10), '<br>')}</p>\n"
        f"<h2>Pins</h2>\n<ul>{pins}</ul>\n<p>Python {e(p.python)}; torch backend "
        f"<code>{e(backend)}</code>"
        + (f" (CUDA {e(p.torch.cuda)})" if p.torch.cuda else "")
        + f"</p>\n<h2>NVIDIA driver</h2>\n<p class=driver>{e(item.driver)}{e(note)}</p>\n"
        "<h2>Lock cells</h2>\n<table class=plain><thead><tr><th>cell</th><th>state</th>"
        f"<th>needs</th><th>why</th></tr></thead><tbody>{cells}</tbody></table>\n"
        f"<h2>Published constraints</h2>\n<ul>{files or '<li>none published</li>'}</ul>\n"
        f"<h2>compat of its pins</h2>\n{_compat_block(item.compat, item.compat_error)}"
        f"<h2>Architectures it loads ({len(p.models.architectures)})</h2>\n"
        f"<details><summary>the pinned vLLM's registry</summary><p>{archs}</p></details>\n"
        f"<h2>Listed, but vLLM's test registry bounds them away from these pins</h2>\n"
        f"<ul>{bounds or '<li>none</li>'}</ul>\n"
    )
    return page(p.name, body, depth=1)


def _compat_block(report: CompatReport | None, error: str) -> str:
    if report is None:
        return f"<p>not checked{': ' + e(error) if error else ''}</p>\n"
    verdict = "compatible" if report.compatible else "not compatible"
    return f"<p>vLLM {e(report.vllm)} + transformers {e(report.transformers)}: {verdict}</p>\n" + (
        _findings(report) if report.findings else ""
    )


def _findings(report: CompatReport) -> str:
    rows = "".join(
        f"<tr><td>{e(f.code.value)}</td><td><code>{e(f.name)}</code></td>"
        f"<td>{e(f.module if f.module != f.name else '')}</td>"
        f"<td><code>{e(f.file)}:{f.line}</code>{e(f' (+{f.places - 1})') if f.places > 1 else ''}"
        f"</td><td>{e(f.removed_in)}</td>"
        f"<td>{e(', '.join([*f.architectures, *f.model_types]) or 'vLLM itself')}"
        "</td></tr>\n"
        for f in report.findings
    )
    return (
        "<table class=plain><thead><tr><th>finding</th><th>name</th><th>from</th>"
        "<th>used at</th><th>removed in</th><th>breaks</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>\n"
    )


def compat_page(data: SiteData) -> str:
    blocks = "".join(
        f"<h2>vLLM {e(r.vllm)} + transformers {e(r.transformers)}</h2>\n"
        f"<p>what <code>pip install vllm=={e(r.vllm)}</code> resolves to today; vLLM was made "
        f"against transformers {e(r.reference or '?')}</p>\n{_findings(r)}"
        for r in data.known_bad
    )
    body = (
        "<h1>Known-bad vLLM + transformers pairs</h1>\n<p class=lead>Each shipped profile's "
        "vLLM with the newest transformers its own requirement allows, checked by "
        "<code>envkit compat</code> from the two wheels: the transformers names and class "
        "attributes that vLLM uses and that release lacks.</p>\n"
        + (blocks or "<p>None found.</p>\n")
    )
    return page("Known-bad pairs", body)


def sources_page(data: SiteData) -> str:
    rows = "".join(
        f"<tr><td>{e(r.version)}</td><td>{e(r.uploaded)}</td><td>{e(r.transformers)}</td>"
        f"<td>{e(r.wheel) if r.readable else 'registry unreadable'}</td>"
        f"<td>{e(r.kernels) or 'not in the table'}</td><td>{e(r.cuda)}</td>"
        f"<td>{e(r.torch)}</td></tr>\n"
        for r in reversed(data.releases)
    )
    body = (
        "<h1>Sources</h1>\n<p class=lead>Generated by <code>envkit site</code> from each vLLM "
        "release's wheel (model registry, read by HTTP range requests and parsed, never run), "
        "each release's source distribution (its test registry's transformers bounds), and "
        f"transformers {e(data.transformers)}'s auto model tables (which model types name an "
        "architecture). The GPU columns come from envkit's kernel table "
        "(<code>data/gpu-kernels.json</code>, read from the same wheels and the pinned torch's "
        "default build): the SASS and PTX targets every main fatbin container of the core "
        "modules carries, and the CUDA runtime major they need. The same caches give the same "
        "pages, byte for byte.</p>\n"
        "<table class=plain><thead><tr><th>vLLM</th><th>published</th><th>transformers "
        "declared</th><th>wheel read</th><th>kernels (core modules)</th><th>CUDA runtime</th>"
        f"<th>pinned torch (default build)</th></tr></thead><tbody>{rows}</tbody></table>\n"
    )
    return page("Sources", body)


def assets() -> Iterable[tuple[str, str]]:
    """The stylesheet and the script, shipped as package data."""
    for name in ("site.css", "site.js"):
        yield name, (resources.files("envkit") / "data" / name).read_text(encoding="utf-8")
