"""envkit site: the pages from the served registry world, reproducible, in a folder envkit
may write; and opened in a real headless Chromium when the machine has one."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

import indexserver
from helpers import ROOT, envkit_process, output, run_cli
from indexserver import url

CHROMIUM = next(
    (shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None
)


def profile(folder: Path, world: indexserver.Server, vllm: str, transformers: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"p{vllm}.toml").write_text(
        f'python = "3.12"\nrequirements = ["vllm=={vllm}"]\n'
        f'constraints = ["transformers=={transformers}"]\n'
    )
    res = run_cli("--envs", str(folder), "scan", "--update", f"p{vllm}", "--index-url", url(world))
    res.assert_ok()
    return folder


@pytest.fixture(scope="module")
def site(world: indexserver.Server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site of one profile of the world, made once for the module: site/ beside the
    envs/ and the envkit cache (cache/, ENVKIT_CACHE_DIR while it was made) it came from.
    Only read: a test that writes to it works on a copy (:func:`site_copy`)."""
    root = tmp_path_factory.mktemp("site")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ENVKIT_CACHE_DIR", str(root / "cache"))
        envs = profile(root / "envs", world, "0.8.5", "4.51.3")
        out = root / "site"
        res = run_cli("--envs", str(envs), "site", "--out", str(out), "--index-url", url(world))
        res.assert_ok()
    return out


@pytest.fixture
def site_copy(site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the module's site with its envs/ and cache/ (ENVKIT_CACHE_DIR), to write to."""
    for name in ("envs", "cache", "site"):
        shutil.copytree(site.parent / name, tmp_path / name, symlinks=True)
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "site"


def digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_the_matrix_and_the_profile_pages(site: Path) -> None:
    index = (site / "index.html").read_text()
    assert '<tr data-s="llamaforcausallm' in index and 'data-f="' in index
    # Phi3Small: listed in 0.8.5 only, then recorded as dropped (the world's 0.33.0)
    assert "Phi3SmallForCausalLM, vLLM 0.33.0: dropped; supported until 0.9.2" in index
    # vLLM 0.8.5's test registry bounds Mllama (max 4.48): said in the cell's title
    assert "MllamaForConditionalGeneration, vLLM 0.8.5: listed; vLLM&#x27;s tests need" in index
    assert 'class="v s"' in index  # 0.8.5 is a shipped profile's release: its column marked
    assert (site / "index.html").stat().st_size + (site / "site.js").stat().st_size < 2_000_000
    page = (site / "profiles" / "p0.8.5.html").read_text()
    assert "vllm==0.8.5" in page and "py3.12-linux-x86_64" in page
    assert "MllamaForConditionalGeneration: transformers &lt;= 4.48" in page
    assert "<p class=driver>not stated: the profile names no CUDA build" in page  # no [torch]
    for name in ("compat.html", "sources.html", "profiles.html", "site.css", ".envkit-site.json"):
        assert (site / name).is_file(), name
    # the sources page's GPU facts, from envkit's kernel table of the real releases' wheels
    sources = (site / "sources.html").read_text()
    assert "<td>sm_70, sm_75, sm_80, sm_86, sm_89, sm_90</td><td>12</td>" in sources
    assert "<td>torch 2.6.0 (CUDA 12.4): sm_50, sm_60, sm_70, sm_75, sm_80, sm_86, sm_90</td>" in (
        sources
    )


def test_the_same_caches_give_the_same_bytes(
    site_copy: Path, world: indexserver.Server, tmp_path: Path
) -> None:
    site, again, cache = site_copy, tmp_path / "again", tmp_path / "cache"
    # another process with another hash seed: no set or dict order may leak into the pages
    res = envkit_process(
        "--envs", str(tmp_path / "envs"), "site", "--out", str(again), "--index-url", url(world),
        cwd=tmp_path, env={"PYTHONHASHSEED": "12345", "ENVKIT_CACHE_DIR": str(cache)},
    )  # fmt: skip
    res.assert_ok()
    assert digests(again) == digests(site)
    rerun = run_cli(
        "--envs", str(tmp_path / "envs"), "site", "--out", str(site), "--index-url", url(world),
        "--json",
    )  # fmt: skip
    assert rerun.code == 0 and output("site", rerun.out)["matrix_bytes"] < 2_000_000


def test_a_folder_envkit_did_not_make_is_refused(
    world: indexserver.Server, scan_cache: Path, tmp_path: Path
) -> None:
    mine = tmp_path / "thesis"
    mine.mkdir()
    (mine / "chapter1.tex").write_text("keep me")
    res = run_cli(
        "--envs", str(ROOT / "envs"), "site", "--out", str(mine), "--index-url", url(world)
    )
    assert res.code == 2 and "not a site envkit wrote" in res.err
    assert (mine / "chapter1.tex").read_text() == "keep me" and len(list(mine.iterdir())) == 1
    # a folder that cannot be made is said before any read, not after the scans
    for out, said in ((mine / "chapter1.tex" / "site", "is not a folder"),
                      (Path("/proc/envkit-site/x"), "takes no new file")):  # fmt: skip
        res = run_cli("--envs", str(ROOT / "envs"), "site", "--out", str(out))
        assert res.code == 2 and said in res.err and "reading" not in res.err, res


def test_known_bad_pairs_come_from_compat(
    compat_world: indexserver.Server, scan_cache: Path, tmp_path: Path
) -> None:
    envs = profile(tmp_path / "envs", compat_world, "0.8.5", "4.51.3")
    out = tmp_path / "site"
    res = run_cli("--envs", str(envs), "site", "--out", str(out), "--index-url", url(compat_world))
    res.assert_ok()
    page = (out / "compat.html").read_text()
    assert "vLLM 0.8.5 + transformers 5.0.0" in page  # what vLLM 0.8.5's own range allows
    assert "all_special_tokens_extended" in page and "vllm/transformers_utils/tokenizer.py" in page


@pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on this machine (.ci/run installs it with apt-get)"
)
def test_the_site_in_a_real_headless_chromium(site: Path, tmp_path: Path) -> None:
    assert CHROMIUM is not None
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    target = (site / "index.html").as_uri()
    shot = tmp_path / "site.png"
    done = subprocess.run(  # one start of the browser: the DOM once scripts ran, and a picture
        [*base, "--enable-logging=stderr", "--v=0", "--dump-dom", f"--screenshot={shot}",
         "--window-size=1400,900", f"{target}?q=qwen2"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console == []  # the page logs nothing, let alone errors
    dom = done.stdout
    assert 'data-s="llamaforcausallm' in dom
    rows = [line for line in dom.split("<tr ")[1:] if line.startswith("data-s=")]
    shown = [r for r in rows if "hidden" not in r.split(">", 1)[0]]
    assert shown and all("qwen2" in r.split(">", 1)[0] for r in shown)  # the search filtered
    assert len(shown) < len(rows)
    assert f"{len(shown)} of {len(rows)} architectures" in dom
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_profile_pages_say_the_driver_each_profile_and_cell_needs(tmp_path: Path) -> None:
    from envkit.lock.cells import Cell, CellState, CellStatus
    from envkit.profiles.profile import parse_profile
    from envkit.site import html
    from envkit.site.data import ProfilePage, SiteData, _page

    text = (
        'python = "3.12"\nrequirements = ["vllm==0.8.5"]\n[torch]\nbackend = "cu124"\n'
        '[matrix]\nbackends = ["cu124", "cpu"]\n'
    )
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "p.toml").write_text(text)
    p = parse_profile(text, path=tmp_path / "envs" / "p.toml", name="p")
    item = _page(p, str(tmp_path / "constraints"), checker=None)  # type: ignore[arg-type]
    assert item.driver == "CUDA 12.4 or newer (NVIDIA driver 550.54.14 or newer)"
    assert "525.60.13 or newer also starts it" in item.driver_note
    cells = tuple(
        CellState(cell=Cell(profile="p", python="3.12", platform="linux-x86_64", backend=b),
                  status=CellStatus.MISSING)
        for b in ("cu124", "cpu")
    )  # fmt: skip
    page = html.profile_page(ProfilePage(p, cells, (), None, driver=item.driver))
    assert (
        "<h2>NVIDIA driver</h2>\n<p class=driver>CUDA 12.4 or newer (NVIDIA driver 550.54.14 "
        "or newer)</p>" in page
    )
    assert "<td>missing</td><td>CUDA 12.4 or newer (NVIDIA driver 550.54.14 or newer)</td>" in (
        page.replace(" class=st-missing", "")
    )
    assert "<td>no GPU driver (a CPU build)</td>" in page
    listing = html.profiles_index(
        SiteData(releases=(), rows=(), profiles=(ProfilePage(p, (), (), None, driver=item.driver),),
                 known_bad=(), transformers="")
    )  # fmt: skip
    assert "driver: CUDA 12.4 or newer (NVIDIA driver 550.54.14 or newer)</li>" in listing
