"""The ctypes binding of libsbsh's C ABI (sbsh.h), and how libsbsh is found. Private.

The structures and every function's prototype come from _cabi.py, which the build generates
from sbsh.h's declarations (python/gen/py_cabi.h); the prototypes are declared once, when
the library is loaded.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal as _signal
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _cabi, _install
from .errors import Error, LibraryNotFound, error_for

# Status codes of sbsh.h.
OK = 0
ERR_UNREACHABLE = -1
ERR_REFUSED = -2
ERR_IO = -3
ERR_TIMEOUT = -4
ERR_INVALID = -5
ERR_INTERNAL = -6
ERR_PROTOCOL = -7
ERR_NOT_FOUND = -8
PENDING = 1  # sbsh_exec_call_step: not ended yet

OUTPUT_FN: Any = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t)
EVENT_FN: Any = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t)

EnvLike = Union[Mapping[str, str], Sequence[str], None]
StrOrBytes = Union[str, bytes, "os.PathLike[str]"]
# A path: str (encoded by os.fsencode, so names that are not UTF-8 pass as os.fsdecode gave
# them), bytes as given, or a path-like object.
PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


# sbsh_exec_opts, sbsh_session_spec and sbsh_run_opts: their fields and types are read from
# sbsh.h by the build (_cabi.py).
ExecOpts, SessionSpec, RunOpts = _cabi.structures(OUTPUT_FN, EVENT_FN)


_libs: Dict[str, ctypes.CDLL] = {}
_loaded_from: Dict[int, str] = {}
_libs_lock = threading.Lock()
SONAME = "libsbsh.so.0"


def candidates(lib: Optional[str] = None) -> List[str]:
    """Where libsbsh is looked for, in order: `lib`, else $SBSH_LIB, else beside this package,
    else the libdir it was installed with (cmake --install, the Debian package), else the
    system's loader (the plain soname, then ctypes.util.find_library)."""
    if lib:
        return [lib]
    if os.environ.get("SBSH_LIB"):
        return [os.environ["SBSH_LIB"]]
    here = os.path.dirname(os.path.abspath(__file__))
    out = [os.path.join(here, SONAME), os.path.join(here, "libsbsh.so")]
    if _install.LIBDIR:
        out.append(os.path.join(_install.LIBDIR, SONAME))
    out = [p for p in out if os.path.exists(p)]
    out.append(SONAME)
    found = ctypes.util.find_library("sbsh")
    if found:
        out.append(found)
    return out


def load(lib: Optional[str] = None) -> ctypes.CDLL:
    """Loads libsbsh once per path and declares every function's prototype."""
    with _libs_lock:
        errors: List[str] = []
        for path in candidates(lib):
            if path in _libs:
                return _libs[path]
            try:
                L = ctypes.CDLL(path)
            except OSError as e:
                errors.append(str(e))
                continue
            for name, (res, args) in _cabi.prototypes(ExecOpts, SessionSpec, RunOpts, OUTPUT_FN, EVENT_FN).items():
                try:
                    f = getattr(L, name)
                except AttributeError:
                    raise LibraryNotFound(f"{path} lacks {name}: it is an older libsbsh than this package",
                                          code=ERR_INVALID, reason="library_mismatch") from None
                f.restype, f.argtypes = res, args
            _libs[path] = L
            _loaded_from[id(L)] = path
            return L
        where = "; ".join(errors) or "not found"
        raise LibraryNotFound(f"cannot load libsbsh ({where}): pass lib=, set SBSH_LIB, or install libsbsh",
                              code=ERR_INVALID, reason="no_library")


def loaded_path(L: ctypes.CDLL) -> str:
    """The path (or soname) a loaded library was found under."""
    return _loaded_from.get(id(L), "")


def last_error(L: ctypes.CDLL, rc: int, conn: Any) -> Error:
    """The exception for status rc of the most recent call on conn (None: of this thread)."""
    return error_for(rc, text(L.sbsh_last_error(conn)), text(L.sbsh_last_error_code(conn)))


def text(b: Optional[bytes]) -> str:
    """A C string as str; invalid UTF-8 bytes become U+FFFD."""
    return b.decode("utf-8", "replace") if b else ""


def enc(s: Optional[PathArg]) -> Optional[bytes]:
    """A path, name or argument as the C string libsbsh takes; None stays None.

    bytes are taken as given; str and path-like objects go through os.fsencode, so a file
    name that is not UTF-8 (as os.listdir and os.fsdecode give it, with surrogate escapes)
    reaches sbshd as its own bytes. A NUL byte raises ValueError: a C string ends there, and
    what follows it would be dropped without a word.
    """
    if s is None:
        return None
    if not isinstance(s, (str, bytes, os.PathLike)):
        raise TypeError(f"expected str, bytes or os.PathLike, not {type(s).__name__}")
    b = s if isinstance(s, bytes) else os.fsencode(s)
    if b"\0" in b:
        raise ValueError(f"{s!r} contains a NUL byte, which no path, name or argument can hold (a C string ends "
                         "there): remove it")
    return b


def str_array(items: Sequence[PathArg]) -> Tuple[Any, int]:
    """A char*[] (kept alive by the returned array) and its length."""
    e = [enc(x) for x in items]
    return (ctypes.c_char_p * max(1, len(e)))(*e), len(e)


def env_list(env: EnvLike) -> List[str]:
    if env is None:
        return []
    if isinstance(env, Mapping):
        return [f"{k}={v}" for k, v in env.items()]
    if isinstance(env, (str, bytes)):
        raise TypeError("env takes a mapping or a sequence of 'NAME=VALUE' strings, not one string")
    return list(env)


def ms(seconds: Optional[float], what: str) -> int:
    """Seconds to whole milliseconds (at least 1 for any positive value); None: 0."""
    if seconds is None:
        return 0
    if seconds <= 0:
        raise ValueError(f"{what} must be a positive number of seconds, or None")
    return max(1, int(round(seconds * 1000)))


def signum(sig: Union[int, str]) -> int:
    if isinstance(sig, str):
        name = sig.upper()
        return int(_signal.Signals[name if name.startswith("SIG") else "SIG" + name])
    return int(sig)


def take_string(L: ctypes.CDLL, out: ctypes.c_void_p) -> str:
    """A malloc'd C string from libsbsh, released."""
    try:
        return ctypes.string_at(out).decode("utf-8", "replace")
    finally:
        L.sbsh_free(out)
