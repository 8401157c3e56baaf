"""Runs inside the checked environment's own interpreter and reports facts as JSON.

It judges nothing (envkit does, with packaging, outside). Kept compatible with old Pythons
and free of third-party imports: it runs in whatever interpreter the venv has.
Usage: python inside_venv.py SPEC.json OUT.json
"""

import importlib
import json
import os
import re
import site
import sys
import time
import traceback


def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _real(path):
    return os.path.realpath(path) if path else path


# A wheel's metadata folder, NAME-VERSION.dist-info with NAME's '-' written '_': the name
# importlib.metadata's own look-up by name goes by (an .egg-info folder may lack the version)
_DIST_INFO = re.compile(r"([A-Za-z0-9_.]+)-[^-]*\.dist-info")


def _folder_name(dist):
    """The project ``dist``'s folder names, normalized, or None (not NAME-VERSION.dist-info)."""
    folder = os.path.basename(str(getattr(dist, "_path", "") or ""))
    match = _DIST_INFO.fullmatch(folder)
    return _norm(match.group(1)) if match else None


def _distributions(wanted, every=False):
    from importlib import metadata

    found = {name: [] for name in wanted}
    seen = set()  # each dist-info once: one folder seen through two sys.path entries is one
    for dist in metadata.distributions():
        folder = _folder_name(dist)
        if not every and folder is not None and folder not in found:
            continue  # its METADATA is not read (a vLLM venv holds some 150)
        # a folder whose METADATA cannot be read goes by its folder's name, with no version
        name = _norm(dist.metadata["Name"] or "") or folder or ""
        if not name:
            continue
        if name not in found:
            if not every:
                continue
            found[name] = []
        info = _real(str(getattr(dist, "_path", "") or ""))
        if info:
            if info in seen:
                continue
            seen.add(info)
        location = ""
        try:
            location = str(dist.locate_file(""))
        except Exception:
            pass
        installer = (dist.read_text("INSTALLER") or "").strip()
        entry = {"version": dist.version or "", "location": _real(location), "installer": installer}
        editable = _editable_project(dist)
        if editable:
            entry["editable"] = editable
        if name in ("vllm", "transformers", "torch"):  # the pair verify and doctor judge
            entry["requires"] = list(dist.requires or [])
        found[name].append(entry)
    return found


def _editable_project(dist):
    """The project folder of an editable install (PEP 660's direct_url.json), else ''."""
    import json

    try:
        data = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        return ""
    url = data.get("url", "") if isinstance(data, dict) else ""
    info = data.get("dir_info", {}) if isinstance(data, dict) else {}
    if isinstance(info, dict) and info.get("editable") and url.startswith("file://"):
        from urllib.parse import unquote, urlparse

        return _real(unquote(urlparse(url).path))
    return ""


def _copies(top):
    """Every sys.path entry holding a module or package named ``top``."""
    out = []
    seen = set()  # lib64 -> lib: one folder reached twice is one copy
    for index, entry in enumerate(sys.path):
        base = os.path.join(entry or os.getcwd(), top)
        real = _real(entry or os.getcwd())
        if real not in seen and (os.path.isdir(base) or os.path.isfile(base + ".py")):
            seen.add(real)
            out.append({"index": index, "entry": real})
    return out


def _module_file(module):
    path = getattr(module, "__file__", None)
    if path:
        return _real(path)
    paths = list(getattr(module, "__path__", []) or [])
    return _real(paths[0]) if paths else ""


def _error(exc):
    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return last[:500]


def _import(name):
    start = time.time()
    try:
        module = importlib.import_module(name)
    except BaseException as exc:
        return {"ok": False, "error": _error(exc), "seconds": time.time() - start}
    return {
        "ok": True,
        "file": _module_file(module),
        "seconds": time.time() - start,
        "copies": _copies(name.split(".")[0]),
    }


def _probe(dotted):
    parts = dotted.split(".")
    module = None
    used = 0
    for cut in range(len(parts) - 1, 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        except BaseException as exc:
            return {"ok": False, "error": _error(exc), "module": ".".join(parts[:cut])}
        used = cut
        break
    if module is None:
        return {"ok": False, "error": "no module of %r can be imported" % dotted, "module": ""}
    target = module
    for index, attr in enumerate(parts[used:], start=used):
        try:
            target = getattr(target, attr)
        except BaseException as exc:
            owner = ".".join(parts[:index])
            return {
                "ok": False,
                "module": ".".join(parts[:used]),
                "error": "%s has no attribute %r (%s)" % (owner, attr, _error(exc)),
            }
    return {"ok": True, "module": ".".join(parts[:used])}


def _torch():
    try:
        import torch
    except BaseException as exc:
        return {"ok": False, "error": _error(exc)}
    info = {"ok": True, "version": str(torch.__version__), "file": _module_file(torch)}
    version = getattr(torch, "version", None)
    info["cuda"] = getattr(version, "cuda", None)
    try:
        info["cuda_available"] = bool(torch.cuda.is_available())
    except BaseException as exc:
        info["cuda_available"] = False
        info["cuda_error"] = _error(exc)
    return info


def main(spec_path, out_path):
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    facts = {
        "executable": sys.executable,
        "prefix": _real(sys.prefix),
        "base_prefix": _real(sys.base_prefix),
        "version": ".".join(str(v) for v in sys.version_info[:3]),
        "sys_path": [_real(p) for p in sys.path],
        "pythonpath": [_real(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p],
        "user_site": _real(site.getusersitepackages()) if site.ENABLE_USER_SITE else "",
        "site_packages": [_real(p) for p in site.getsitepackages()],
    }
    facts["distributions"] = _distributions(
        [_norm(n) for n in spec.get("distributions", [])], bool(spec.get("all_distributions"))
    )
    facts["imports"] = {name: _import(name) for name in spec.get("imports", [])}
    facts["probes"] = {name: _probe(name) for name in spec.get("probes", [])}
    if spec.get("torch") or (
        spec.get("torch_if_installed") and facts["distributions"].get("torch")
    ):
        facts["torch"] = _torch()
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(facts, fh)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
