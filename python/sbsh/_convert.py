"""What the generated records module (_records.py, written by the build from the records'
field tables) builds on: how a value of the JSON form becomes a Python one, and the
behaviour a record adds to its fields. Private.
"""
from __future__ import annotations

import base64
import os
import signal as _signal
from datetime import datetime
from typing import Any, ClassVar, Mapping, Optional, Sequence, Tuple


def unix_time(rfc3339: Optional[str]) -> Optional[float]:
    """"2026-11-22T13:58:50.123Z" as Unix time in seconds."""
    if not rfc3339:
        return None
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def signal_number(name: Optional[str]) -> Optional[int]:
    """"SIGTERM" (or "SIG40") as a number."""
    if name is None:
        return None
    try:
        return int(_signal.Signals[name])
    except KeyError:
        return int(name[3:]) if name[3:].isdigit() else None


def _opt_int(v: Any) -> Optional[int]:
    return None if v is None else int(v)


def _opt_float(v: Any) -> Optional[float]:
    return None if v is None else float(v)


def _opt_bool(v: Any) -> Optional[bool]:
    return None if v is None else bool(v)


def _opt_str(v: Any) -> Optional[str]:
    return None if v is None else str(v)


def _strs(v: Any) -> Tuple[str, ...]:
    if isinstance(v, Mapping):
        return tuple(f"{k}={x}" for k, x in v.items())
    return tuple(str(x) for x in (v or ()))


def _command_ref(v: Any) -> int:
    """A kept command's "%17" as 17."""
    return int(str(v or "").lstrip("%") or 0)


def _octal(v: Any) -> int:
    """A mode's "0644" as a number."""
    return int(str(v or "0"), 8)


def _name(d: Mapping[str, Any], key: str) -> Optional[str]:
    """A name or path of a listing: from its exact bytes (KEY_base64) when it is not UTF-8."""
    raw = d.get(key + "_base64")
    if raw:
        return os.fsdecode(base64.b64decode(str(raw)))
    return _opt_str(d.get(key))


def _names(d: Mapping[str, Any], key: str) -> Tuple[str, ...]:
    """A list of names: each from its exact bytes (KEY_base64's entry) when it is not UTF-8."""
    texts = [str(x) for x in d.get(key) or ()]
    exact = d.get(key + "_base64") or ()
    return tuple(os.fsdecode(base64.b64decode(str(b))) if b else t
                 for t, b in zip(texts, list(exact) + [None] * (len(texts) - len(exact))))


def _exact(d: Mapping[str, Any], key: str) -> bytes:
    """A text's exact bytes: KEY_base64 when it was not UTF-8, else the text itself."""
    raw = d.get(key + "_base64")
    if raw:
        return base64.b64decode(str(raw))
    return str(d.get(key) or "").encode()


def _confinement(c: Mapping[str, Any]) -> Mapping[str, Any]:
    """SessionDefinition's confinement fields from `definition.confinement`: its rules after
    the root's and TMPDIR's are the added paths, by their access."""
    added: dict[str, list[str]] = {"read-write": [], "read-execute": [], "read-only": []}
    confine = bool(c.get("landlock"))
    for rule in list(c.get("rules") or ())[2 if confine else 0:]:
        added.setdefault(str(rule.get("access", "")), []).append(_name(rule, "path") or "")
    return {"confine": confine, "allow_write": tuple(added["read-write"]), "allow_read": tuple(added["read-execute"]),
            "read_only": tuple(added["read-only"]), "no_network": "net" in (c.get("namespaces") or ()),
            "landlock_abi": int(c.get("landlock_abi") or 0), "memory_max": int(c.get("memory_max") or 0),
            "pids_max": int(c.get("pids_max") or 0), "cpu_millis": int(c.get("cpu_millis") or 0),
            "cgroup": _opt_str(c.get("cgroup"))}


def sequence_of(v: Any) -> Sequence[Mapping[str, Any]]:
    return list(v) if isinstance(v, list) else []


class _Stateful:
    """A record with a state, some of which mean it still runs (_RUNNING)."""
    __slots__ = ()
    _RUNNING: ClassVar[Tuple[str, ...]] = ()
    state: str

    @property
    def running(self) -> bool:
        return self.state in self._RUNNING


class _ProcessInfoBase(_Stateful):
    __slots__ = ()
    _RUNNING = ("starting", "running")


class _CommandInfoBase(_Stateful):
    __slots__ = ()
    _RUNNING = ("queued", "running")
