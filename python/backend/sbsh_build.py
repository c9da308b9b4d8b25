"""The PEP 517 build backend of the sbsh package, standard library only.

`pip install BUILD/python` (the package as the C build stages it: python with the
generated sbsh/_records.py) then works in any virtual environment, offline, with nothing
installed beforehand: pip finds this module through `backend-path` in pyproject.toml and
needs no setuptools or wheel, which a fresh venv may lack (Debian 12's has no wheel) and
which build isolation would fetch from an index. It builds the wheel (PEP 427), an editable
wheel (PEP 660) and the sdist straight into the directory pip names: nothing is written into
the source tree (no build/, no *.egg-info; only Python's own cache of this module's bytecode,
backend/__pycache__, unless PYTHONDONTWRITEBYTECODE is set, which git ignores).

The metadata is pyproject.toml's [project] table, read with tomllib, or on Python 3.10 with
the small reader below, which takes the subset of TOML that file is written in.
"""
from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import re
import stat
import tarfile
import time
import zipfile
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # BUILD/python (python's copy)
PACKAGE = "sbsh"
TAG = "py3-none-any"
# The sdist holds what a wheel is built from, and nothing else.
SDIST_FILES = ("pyproject.toml", "README.md", "backend/sbsh_build.py")
ConfigSettings = Optional[Mapping[str, Any]]


# -- pyproject.toml ----------------------------------------------------------------------------

def _toml_value(text: str, where: str) -> Any:
    """One value of the subset: a basic string, an array of them, or an inline table of them."""
    text = text.strip()
    if text.startswith('"'):
        if not re.fullmatch(r'"(?:[^"\\]|\\.)*"', text):
            raise ValueError(f"pyproject.toml: {where}: a string must be one line in double quotes")
        return json.loads(text)  # the escapes of a basic string are those of JSON, but for \\U
    if text.startswith("["):
        return [_toml_value(v, where) for v in re.findall(r'"(?:[^"\\]|\\.)*"', text)]
    if text.startswith("{"):
        return {k: _toml_value(v, where) for k, v in re.findall(r'(\w[\w-]*)\s*=\s*("(?:[^"\\]|\\.)*")', text)}
    if text in ("true", "false"):
        return text == "true"
    raise ValueError(f"pyproject.toml: {where}: this reader takes strings, arrays of strings and inline tables")


def _read_toml_subset(text: str) -> Dict[str, Any]:
    doc: Dict[str, Any] = {}
    table = doc
    pending = ""  # an array that goes on over several lines
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip() if pending else re.sub(r'\s+#.*$|^#.*$', "", raw).strip()
        if pending:
            pending += " " + re.sub(r'\s+#.*$', "", line)
            if not line.startswith("]") and not line.endswith("]"):
                continue
            key, value = pending.split("=", 1)
            table[key.strip()] = _toml_value(value, f"line {n}")
            pending = ""
            continue
        if not line:
            continue
        m = re.fullmatch(r"\[([\w.-]+)\]", line)
        if m:
            table = doc
            for part in m.group(1).split("."):
                table = table.setdefault(part, {})
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ValueError(f"pyproject.toml: line {n}: expected KEY = VALUE or [TABLE]")
        if value.strip().startswith("[") and not value.strip().endswith("]"):
            pending = line
            continue
        table[key.strip()] = _toml_value(value, f"line {n}")
    return doc


def _project() -> Dict[str, Any]:
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        data = f.read()
    try:
        import tomllib
        doc = tomllib.loads(data.decode("utf-8"))
    except ImportError:  # Python 3.10
        doc = _read_toml_subset(data.decode("utf-8"))
    project = doc.get("project")
    if not isinstance(project, dict) or not project.get("name") or not project.get("version"):
        raise ValueError("pyproject.toml: [project] must give name and version")
    return project


def _metadata(project: Mapping[str, Any]) -> bytes:
    """METADATA (core metadata 2.1), the README as its description."""
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}"]
    if project.get("description"):
        lines.append(f"Summary: {project['description']}")
    if project.get("requires-python"):
        lines.append(f"Requires-Python: {project['requires-python']}")
    lic = project.get("license")
    if isinstance(lic, dict) and lic.get("text"):
        lines.append(f"License: {lic['text']}")
    lines += [f"Classifier: {c}" for c in project.get("classifiers", [])]
    readme = project.get("readme")
    body = ""
    if isinstance(readme, str):
        lines.append("Description-Content-Type: text/markdown" if readme.endswith(".md") else
                     "Description-Content-Type: text/plain")
        with open(os.path.join(HERE, readme), encoding="utf-8") as f:
            body = f.read()
    return ("\n".join(lines) + "\n\n" + body).encode("utf-8")


def _dist_name(project: Mapping[str, Any]) -> str:
    return f"{re.sub(r'[-_.]+', '_', project['name']).lower()}-{project['version']}"


# -- archives ----------------------------------------------------------------------------------

# Written by the C build from the records' field tables (python/gen), into its copy of
# this directory: the source tree has none.
GENERATED = f"{PACKAGE}/_records.py"


def _package_files() -> List[str]:
    """The package's files, relative to HERE: its modules and py.typed, no caches."""
    if not os.path.exists(os.path.join(HERE, GENERATED)):
        raise RuntimeError(f"{os.path.join(HERE, GENERATED)} is missing: it is generated by the C build, which "
                           "stages the package in BUILD/python (cmake --build BUILD, or scripts/build.sh build); "
                           "install that directory (pip install BUILD/python), not python")
    out = []
    for name in sorted(os.listdir(os.path.join(HERE, PACKAGE))):
        if name.endswith(".py") or name == "py.typed":
            out.append(f"{PACKAGE}/{name}")
    return out


# Archive members get this time: the same sources make the same archive (SOURCE_DATE_EPOCH, as
# reproducible builds set it, wins; a zip cannot hold times before 1980).
def _epoch() -> int:
    return max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800)


def _write_wheel(wheel_directory: str, files: Sequence[Tuple[str, bytes]], project: Mapping[str, Any]) -> str:
    dist = _dist_name(project)
    info = f"{dist}.dist-info"
    members = list(files) + [
        (f"{info}/METADATA", _metadata(project)),
        (f"{info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: sbsh_build\nRoot-Is-Purelib: true\nTag: {TAG}\n".encode()),
        (f"{info}/top_level.txt", f"{PACKAGE}\n".encode()),
    ]
    record = io.StringIO()
    for path, data in members:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.write(f"{path},sha256={digest},{len(data)}\n")
    record.write(f"{info}/RECORD,,\n")
    members.append((f"{info}/RECORD", record.getvalue().encode()))
    name = f"{dist}-{TAG}.whl"
    when = time.gmtime(_epoch())[:6]
    tmp = os.path.join(wheel_directory, f".{name}.part")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for path, data in members:
            zi = zipfile.ZipInfo(path, date_time=when)
            zi.external_attr = (stat.S_IFREG | 0o644) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    os.replace(tmp, os.path.join(wheel_directory, name))
    return name


def _read(rel: str) -> bytes:
    with open(os.path.join(HERE, rel), "rb") as f:
        return f.read()


# -- the hooks (PEP 517, PEP 660) --------------------------------------------------------------

def get_requires_for_build_wheel(config_settings: ConfigSettings = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: ConfigSettings = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: ConfigSettings = None) -> List[str]:
    return []


def build_wheel(wheel_directory: str, config_settings: ConfigSettings = None,
                metadata_directory: Optional[str] = None) -> str:
    """The wheel: the package's modules and py.typed, and its dist-info."""
    return _write_wheel(wheel_directory, [(p, _read(p)) for p in _package_files()], _project())


def build_editable(wheel_directory: str, config_settings: ConfigSettings = None,
                   metadata_directory: Optional[str] = None) -> str:
    """An editable wheel: a .pth file that puts this source directory on sys.path."""
    _package_files()  # it must be the build's copy, which has the generated module
    return _write_wheel(wheel_directory, [(f"_{PACKAGE}_editable.pth", (HERE + "\n").encode())], _project())


def build_sdist(sdist_directory: str, config_settings: ConfigSettings = None) -> str:
    """The sdist (sbsh-VERSION.tar.gz): the package, its backend, pyproject.toml, README.md
    and PKG-INFO, under one directory."""
    project = _project()
    dist = _dist_name(project)
    members = [(p, _read(p)) for p in list(SDIST_FILES) + _package_files()] + [("PKG-INFO", _metadata(project))]
    name = f"{dist}.tar.gz"
    tmp = os.path.join(sdist_directory, f".{name}.part")
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, data in sorted(members):
            ti = tarfile.TarInfo(f"{dist}/{path}")
            ti.size, ti.mode, ti.mtime = len(data), 0o644, _epoch()
            tar.addfile(ti, io.BytesIO(data))
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=_epoch()) as gz:
        gz.write(archive.getvalue())
    os.replace(tmp, os.path.join(sdist_directory, name))
    return name
