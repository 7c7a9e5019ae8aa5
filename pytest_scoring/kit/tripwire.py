"""The tripwire: an audit hook that sees the scored repository reach into the evaluator's
machinery from inside the test process (docs/security.md#the-tripwire).

PYTEST_DONT_REWRITE (pytest never rewrites or warns about this module, whatever the
repository's ``filterwarnings`` says).

The launcher installs it first thing, before pytest is imported and long before any code of
the repository runs; CPython calls it for every audited event of the session and it cannot be
removed. It reports ``tripwire`` (reach-in: frames, code objects, the garbage collector, the
process's own memory and descriptors, ctypes, tracing) and ``patched`` (a function's code or
an object's class swapped) when the event is aimed at the probe, pytest or pluggy and the
innermost frame that is neither the standard library nor one of pytest's helpers that act for
their caller belongs to the repository. Under ``--black-box`` it also refuses every file of the
repository that the test process would import, execute or compile.

The hook runs between the probe's records, where no self-check can look, so nothing it calls
may be changed by the repository: it runs on a sealed copy of this module (:func:`seal`),
whose functions look names up in a private namespace with private builtins, and it keeps its
state in a dictionary no module or class holds. Every module attribute it uses is bound here,
at import. It never raises into the test it watches, except the refusal of ``--black-box``
and a reach-in in a forked child (whose probe sends nothing), and never recurses: an event
raised while it runs in a thread is ignored in that thread.

Like all of the kit it needs only the standard library and keeps to Python 3.8 syntax; unlike
the rest it needs no pytest either, since it is installed before pytest is imported.
"""

from __future__ import annotations

import _thread
import os
import re
import sys
import types
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING
from typing import Any
from typing import NamedTuple
from typing import TypeVar

if TYPE_CHECKING:
    from typing import TypeGuard

_T = TypeVar("_T")

#: What a file is to the tripwire; the longest folder that holds it decides (a ``.venv`` in
#: the repository is the interpreter's; a repository under ``sys.prefix`` is the repository).
REPOSITORY = "repository"
EVALUATOR = "evaluator"  # a file the evaluator put into the repository's copy (--tests-from)
MACHINERY = "machinery"  # the kit, pytest, pluggy
WRAPPER = "wrapper"  # pytest's helpers that act on what their caller hands them
INTERPRETER = "interpreter"  # the running interpreter's own environment, site-packages
STDLIB = "stdlib"
PSEUDO = "pseudo"  # <frozen importlib._bootstrap>, <string>: code without a file
OTHER = "other"  # anywhere else: a module the repository's code may have written
#: Frames the walk passes through: they act for whoever called them.
TRANSPARENT = frozenset({STDLIB, WRAPPER, PSEUDO})
#: Frames whose events are the repository's doing (a file outside every known place may be
#: one the repository wrote, so it is not trusted).
UNTRUSTED = frozenset({REPOSITORY, EVALUATOR, OTHER})

#: Reads that hand out the code of a function or a frame (``object.__getattr__``).
CODE_READS = frozenset(
    {"__code__", "__defaults__", "__kwdefaults__", "gi_code", "cr_code", "ag_code", "f_code"}
)
FRAME_READS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
#: Writes that change what a function runs or what an object is (``object.__setattr__``).
CODE_WRITES = frozenset({"__code__", "__defaults__", "__kwdefaults__", "__class__"})
#: Reach-in by nature when the repository's frame raised them: they see every frame.
EVERYTHING = frozenset(
    {
        "sys._current_frames",
        "sys.settrace",
        "sys.setprofile",
        "sys.monitoring.register_callback",  # Python 3.12
        "sys.monitoring.set_events",
        "gc.get_objects",
    }
)
#: C functions that copy or write memory, or reach another process (``ctypes.dlsym``).
MEMORY_SYMBOLS = frozenset(
    [
        "memmove",
        "memcpy",
        "mempcpy",
        "memccpy",
        "memset",
        "bcopy",
        "bzero",
        "explicit_bzero",
        "strcpy",
        "strncpy",
        "stpcpy",
        "stpncpy",
        "strcat",
        "strncat",
        "wmemcpy",
        "wmemmove",
        "wmemset",
        "process_vm_readv",
        "process_vm_writev",
        "ptrace",
        "mprotect",
        "dlsym",
    ]
)
#: The audit event the probe's channel raises before it sends a record
#: (``pytest_scoring.kit.channel.RECORD_EVENT``).
RECORD_EVENT = "pytest-scoring.record"
#: What a file of the repository that is code ends with (``--black-box``: never opened).
CODE_SUFFIXES = (".pyc", ".pyo", ".so", ".pyd")
#: A path named by an object whose ``__fspath__`` is the repository's own.
OPAQUE = object()
#: Where an ``__fspath__`` the hook may call comes from.
TRUSTED_PATHS = frozenset({STDLIB, MACHINERY, INTERPRETER})
#: ``/proc/<pid>[/task/<tid>][/mem|fd|map_files[/…]]``, resolved.
_PROC_REACH = re.compile(r"^/proc/(\d+)(/task/\d+)?(/(mem|fd|map_files)(/.+)?)?$")

# Bound at import: the hook never looks these up in a module the repository can change.
_stat = os.stat
_fstat = os.fstat
_realpath = os.path.realpath
_join = os.path.join
_exists = os.path.exists
_relpath = os.path.relpath
_fsdecode = os.fsdecode
_getpid = os.getpid
_getframe = sys._getframe
_gettrace = sys.gettrace
_loaded = sys.modules.get  # the interpreter's own modules, whatever ``sys.modules`` names
_get_ident = _thread.get_ident
_match = _PROC_REACH.match
_SEP = os.sep
_FrameType = types.FrameType
_FunctionType = types.FunctionType
_MethodType = types.MethodType
_ModuleType = types.ModuleType
_CodeType = types.CodeType
_TYPE_DICT = type.__dict__["__dict__"].__get__  # a class's own namespace, whatever it defines
_TYPE_MRO = type.__dict__["__mro__"].__get__
_RUNNING = (
    (types.GeneratorType, "gi_code"),
    (types.CoroutineType, "cr_code"),
    (types.AsyncGeneratorType, "ag_code"),
)


class Denied(Exception):
    """What the hook raises into the code that raised the event: it stops what it did."""


class Refused(Denied, ImportError):
    """``--black-box``: the test process may not load a file of the repository."""


class Forged(Denied):
    """Code of the repository called the channel's own ``send``: the record is not sent."""


# --- where a file belongs ------------------------------------------------------------------


def _is(value: object, kinds: type[_T] | tuple[type[_T], ...]) -> TypeGuard[_T]:
    """``isinstance``, by the value's type alone: ``isinstance`` may call a ``__class__`` of
    the repository's, which would run its code inside the hook."""
    return issubclass(type(value), kinds)


def interpreter_folders() -> list[str]:
    """The running interpreter's own environment: its prefixes and site-packages folders
    (the user's site-packages is left out: under ``run`` it lies in a home the tests write)."""
    folders = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}
    try:
        import site

        folders.update(site.getsitepackages())
    except (AttributeError, ImportError):  # an old virtualenv's site module has none
        pass
    site_folders = ("site-packages", "dist-packages")
    folders.update(entry for entry in sys.path if entry.endswith(site_folders))
    return sorted(folder for folder in folders if folder)


def stdlib_folders() -> list[str]:
    """The standard library's folders (its site-packages are the interpreter's, above)."""
    import sysconfig

    paths = sysconfig.get_paths()
    return sorted({paths[name] for name in ("stdlib", "platstdlib") if paths.get(name)})


def places(root: str, start: str | None = None) -> dict[str, Any]:
    """A classifier of files for the repository at ``root``: the interpreter's, the standard
    library's and the repository's folders (the tripwire adds the machinery)."""
    state: dict[str, Any] = {"start": start or os.getcwd(), "folders": [], "kinds": {}}
    state["root"] = _realpath(root)
    for folder in interpreter_folders():
        add_place(state, folder, INTERPRETER)
    for folder in stdlib_folders():
        add_place(state, folder, STDLIB)
    add_place(state, state["root"], REPOSITORY)
    return state


def add_place(state: dict[str, Any], path: str, kind: str) -> None:
    """``path`` (a folder and all in it, or one file) is of ``kind`` from now on."""
    resolved = _realpath(_join(state["start"], path))
    folders = [(folder, old) for folder, old in state["folders"] if folder != resolved]
    folders.append((resolved, kind))
    # Longest first; for one length the repository wins (a PYTHONPATH of ".").
    folders.sort(key=lambda entry: (-len(entry[0]), entry[1] != REPOSITORY))
    state["folders"] = folders
    state["kinds"] = {}


def kind_of(state: dict[str, Any], filename: object) -> str:
    """What the file named ``filename`` (a code object's ``co_filename``) is; each name is
    resolved once, relative to the folder the process started in."""
    if not _is(filename, str):
        return PSEUDO
    kinds: dict[str, str] = state["kinds"]
    known = kinds.get(filename)
    if known is None:
        known = kinds[filename] = _resolve_kind(state, filename)
    return known


def _resolve_kind(state: dict[str, Any], filename: str) -> str:
    if filename.startswith("<") or not filename:
        return PSEUDO
    path = _realpath(_join(state["start"], filename))
    if not filename.startswith("/") and not _exists(path):
        return PSEUDO  # a name, not a file: pytest parses source as "source"
    folders: list[tuple[str, str]] = state["folders"]
    for folder, kind in folders:
        if path == folder or path.startswith(folder + _SEP):
            return kind
    return OTHER


def relative_file(state: dict[str, Any], filename: str) -> str | None:
    """``filename`` relative to the repository (POSIX), when it is the repository's."""
    if kind_of(state, filename) not in (REPOSITORY, EVALUATOR):
        return None
    path, root = _realpath(_join(state["start"], filename)), state["root"]
    if not path.startswith(root + _SEP):
        return None  # another place of the repository's (REPO, under --black-box)
    return _relpath(path, root).replace(_SEP, "/")


_ROOTS: dict[str, dict[str, Any]] = {}


def repository_file(path: object, root: object) -> str | None:
    """``path`` relative to the repository at ``root``, or None when it lies outside it or in
    the running interpreter's own environment (pytest's files in a ``.tox`` or ``.venv``
    inside the repository are not the repository's)."""
    key = str(root)
    if key not in _ROOTS:
        _ROOTS[key] = places(key)
    return relative_file(_ROOTS[key], os.path.abspath(str(path)))


# --- what an event aims at -----------------------------------------------------------------


def _code_of(value: object) -> Any:
    """The code a frame, function, generator or coroutine runs (or the value, when code)."""
    if _is(value, _CodeType):
        return value
    if _is(value, _FrameType):
        return value.f_code
    if _is(value, _FunctionType):
        return value.__code__
    for running, attribute in _RUNNING:
        if _is(value, running):
            return getattr(value, attribute)
    return None


def _machinery_code(state: dict[str, Any], code: object) -> bool:
    return kind_of(state, getattr(code, "co_filename", None)) == MACHINERY


def _machinery(state: dict[str, Any], value: object) -> bool:
    """``value`` is one of the probe's, pytest's or pluggy's objects: protected, or a frame,
    function, generator, code object, class or module of theirs, or an instance of one of
    their classes (told by type only: no code of the value runs)."""
    if id(value) in state["protected_ids"]:
        return True
    if _is(value, _MethodType):
        value = value.__func__
    code = _code_of(value)
    if code is not None:
        return _machinery_code(state, code)
    if _is(value, _ModuleType):
        return kind_of(state, vars(value).get("__file__")) == MACHINERY
    owner = value if _is(value, type) else type(value)
    return _machinery_code(state, _code_of(_first_method(owner)))


def _first_method(owner: type) -> object:
    """A function the class itself defines: its code says which file the class is from
    (never ``sys.modules``, which the repository can change)."""
    for member in list(_TYPE_DICT(owner).values()):
        if _is(member, classmethod) or _is(member, staticmethod):
            member = member.__func__
        if _is(member, _FunctionType):
            return member
    return None


def _fspath(state: dict[str, Any], path: object) -> object:
    """What an event's path names: a string, a descriptor, or :data:`OPAQUE` for an object
    whose ``__fspath__`` is the repository's own (calling it here could name another file
    than the one opened)."""
    if _is(path, str):
        return str.__add__("", path)  # a str, whatever subclass of it came
    if _is(path, bytes):
        return _fsdecode(bytes.__add__(b"", path))
    if _is(path, int) and not _is(path, bool):
        return int.__add__(0, path)
    for owner in _TYPE_MRO(type(path)):
        method = _TYPE_DICT(owner).get("__fspath__")
        if method is not None:
            trusted = _is(method, _FunctionType) and kind_of(state, method.__code__.co_filename)
            return method(path) if trusted in TRUSTED_PATHS else OPAQUE
    return None


def _label(value: object) -> str:
    """What an object is, read from its type (no code of the object runs)."""
    if _is(value, _MethodType):
        value = value.__func__
    if _is(value, _FunctionType) or _is(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    if _is(value, _ModuleType):
        return f"module {value.__name__}"
    code = _code_of(value)
    if code is not None:
        return f"a {type(value).__name__} of {_short(code.co_filename)}"
    return f"a {type(value).__module__}.{type(value).__qualname__}"


def _file_of(code: object) -> str:
    return _short(getattr(code, "co_filename", None))


def _short(filename: object) -> str:
    """A machinery file as people know it: ``_pytest/runner.py``, ``pluggy/_callers.py``,
    ``_pytest/config/__init__.py``."""
    parts = str(filename).replace(_SEP, "/").split("/")
    return "/".join(parts[-3 if parts[-1] == "__init__.py" else -2 :])


def _stat_of(path: object) -> Any:
    """``os.stat`` of a path or a descriptor (as :func:`_fspath` gives them), following links."""
    try:
        if _is(path, int):
            return _fstat(path)
        if _is(path, str):
            return _stat(path)
    except (OSError, ValueError):
        pass
    return None


def _proc_reach(state: dict[str, Any], path: object, listing: bool) -> str | None:
    """What an ``open`` (or, ``listing``, an ``os.listdir``) of ``path`` reaches of this
    process: its memory, its descriptor folder, the probe's channel, or a folder of ``/proc``
    to open those from (``os.open(name, dir_fd=…)``)."""
    info = _stat_of(path)
    if info is None:
        return None
    if (info.st_dev, info.st_ino) in state["protected_files"]:
        return "the probe's channel"
    if info.st_dev != state["proc"] or not _is(path, str):
        return None
    resolved = _realpath(path)
    if resolved == "/proc":
        return None if listing else "/proc, to open what is in it"
    found = _match(resolved)
    if found is None or int(found.group(1)) not in state["pids"] | {_getpid()}:
        return None
    entry, rest = found.group(4), found.group(5)
    if entry == "mem":
        return "the process's memory"
    if entry is None:
        return None if listing else f"{resolved}, to open what is in it"
    return None if rest else f"the process's {entry} folder"


def _protected_address(state: dict[str, Any], address: object) -> bool:
    if not _is(address, int) or _is(address, bool):
        return False
    return any(start <= address < end for start, end in state["ranges"])


# --- one check per event: what it aims at, or None -----------------------------------------


def _frame_returned(state: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    code = _code_of(args[0]) if args else None
    if _machinery_code(state, code):
        return f"sys._getframe() returned a frame of {_file_of(code)}"
    return None


def _attribute_read(state: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    target, name = args[0], args[1]
    if name in FRAME_READS:
        code = _code_of(getattr(target, name, None))
        if _machinery_code(state, code) and not _summarised(state, _caller()):
            return f"read {name} of a frame of {_short(code.co_filename)}"
    elif name in CODE_READS and _machinery(state, target):
        summary = name == "f_code" and _summarised(state, _caller())
        return None if summary else f"read {name} of {_label(target)}"
    return None


def _summarised(state: dict[str, Any], frame: Any) -> bool:
    """The standard library's ``traceback`` reads frames for itself: ``extract_stack()``,
    ``format_exc()`` keep names and line numbers, no frame (pyparsing's warnings find their
    caller so). Its ``walk_stack``/``walk_tb``, called by the repository, hand frames out."""
    return _is_traceback(state, frame) and _is_traceback(state, frame.f_back)


def _is_traceback(state: dict[str, Any], frame: Any) -> bool:
    filename = getattr(getattr(frame, "f_code", None), "co_filename", "")
    return filename.endswith(_SEP + "traceback.py") and kind_of(state, filename) == STDLIB


def _attribute_write(state: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    target, name = args[0], args[1]
    if name in CODE_WRITES and _machinery(state, target):
        return f"set {name} of {_label(target)}"
    return None


def _collector(state: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    for value in args[0] if args and _is(args[0], tuple) else args:
        if _machinery(state, value):
            return f"gc handed out what refers to or from {_label(value)}"
    return None


def _opened(state: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    path = _fspath(state, args[0] if args else None)
    if path is OPAQUE:
        return "opened a path an object of its own names (its __fspath__)"
    if state["black_box"] and _is(path, str) and path.endswith(CODE_SUFFIXES):
        _refuse(state, path, "open")
    reached = _proc_reach(state, path, False)
    return None if reached is None else f"opened {reached}"


def _listed(state: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    path = _fspath(state, args[0] if args and args[0] is not None else ".")
    if path is OPAQUE:
        return "listed a folder an object of its own names (its __fspath__)"
    reached = _proc_reach(state, path, True)
    return None if reached is None else f"listed {reached}"


def _id_taken(state: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    if args and args[0] in state["protected_ids"]:
        return "id() of one of the probe's protected objects"
    return None


def _memory_read(state: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    if args and _protected_address(state, args[0]):
        return "ctypes read or mapped the memory of one of the probe's protected objects"
    return None


def _symbol(state: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    library, name = args[0], args[1]
    name = name.decode() if _is(name, bytes) else str(name)
    interpreter = any(kind.__name__ == "PyDLL" for kind in type(library).__mro__)
    if interpreter or name.startswith(("Py", "_Py")):
        return f"ctypes looked up {name} in the interpreter"
    return f"ctypes looked up {name}" if name in MEMORY_SYMBOLS else None


def _library(state: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    path = _fspath(state, args[0] if args else None)
    if state["black_box"] and _is(path, str) and "/" in path:  # a bare name is the linker's
        _refuse(state, path, "ctypes.dlopen")
    return None


def _compiled(state: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    filename = args[1] if len(args) > 1 else None
    if _is(filename, bytes):
        filename = _fsdecode(filename)
    if not _is(filename, str):
        return None
    if state["black_box"]:
        _refuse(state, filename, "compile")
    if kind_of(state, filename) != MACHINERY or _culprit(state, _caller()) is None:
        return None  # pytest compiling its own modules (reading them again would cost)
    if not _same_source(args[0], filename):
        return f"compiled code under the name of {_short(filename)}"
    return None


def _executed(state: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    code = args[0] if args else None
    filename = getattr(code, "co_filename", None)
    if state["black_box"] and _is(filename, str):
        _refuse(state, filename, "exec")
    if _machinery_code(state, code) and not _imported_from(code, _caller()):
        return f"executed code of {_short(filename)}"
    return None


def _code_made(state: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    filename = args[1] if len(args) > 1 else None
    if kind_of(state, filename) == MACHINERY:
        return f"made a code object under the name of {_short(filename)}"
    return None


def _function_made(state: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    code = args[0] if args else None
    if _machinery_code(state, code):
        return f"made a function of code of {_file_of(code)}"
    return None


def _imported(state: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    name, filename = (*args, None, None)[:2]
    if state["black_box"] and _is(filename, str):
        _refuse(state, filename, "import")
    if _is(name, str) and name in state["protected_modules"]:
        if _loaded(name, _loaded) is None:
            return None  # None in sys.modules: importlib refuses it (packaging's tests do so)
        return f"imported {name} afresh"
    return None


def _record_sent(state: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    """The probe's channel is about to send a record: the self-check runs first and its
    findings go out before it (sent from here, the hook's own state, which nothing the
    repository can reach without an audit event holds). A record the repository's code
    sends (it found ``send`` in the probe's closures) is refused, the refusal sent."""
    verify, send = state["verify"], state["send"]
    if verify is None:
        return None
    record = args[0] if args else None
    frame = _culprit(state, _caller().f_back)  # who called send
    if frame is not None:
        _report(state, "tripwire", "sent a record on the probe's channel", frame, RECORD_EVENT)
    final = frame is None and _is(record, dict) and dict.get(record, "type") == "end"
    for line in verify(final):
        send(line)
    if frame is not None:
        raise Forged("pytest-scoring: only the probe sends on its channel")
    return None


def _everything(state: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    return "looked at every frame or object"  # the hook names the event


def _trace_set(state: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    """``sys.settrace``, unless it is the standard library's ``doctest`` putting back the
    trace function it found when it started (``DocTestRunner.run``, which
    ``doctest.testmod`` calls): that installs nothing new."""
    frame = _caller()
    code = frame.f_code
    doctest = code.co_filename.endswith(_SEP + "doctest.py") and code.co_name == "run"
    if doctest and kind_of(state, code.co_filename) == STDLIB:
        saved = frame.f_locals.get("save_trace", _everything)
        if saved is _gettrace():
            return None
    return _everything(state, args)


def _all_objects(state: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    """``gc.get_objects`` in a forked child of the test process (refused there). In the test
    process itself it hands out nothing the repository cannot reach by walking closures,
    which no audit event shows (docs/security.md#what-in-process-code-can-still-do), and
    honest leak tests count objects with it (MarkupSafe's, boltons' ``gcutils``)."""
    return None if _getpid() == state["owner"] else _everything(state, args)


#: Each event's check: ``check(state, args)`` says what the event aims at, or None.
CHECKS: dict[str, Callable[[dict[str, Any], tuple[Any, ...]], str | None]] = {
    "sys._getframe": _frame_returned,
    "object.__getattr__": _attribute_read,
    "object.__setattr__": _attribute_write,
    "object.__delattr__": _attribute_write,
    "gc.get_referrers": _collector,
    "gc.get_referents": _collector,
    "open": _opened,
    "os.listdir": _listed,
    "os.scandir": _listed,
    "builtins.id": _id_taken,
    "ctypes.string_at": _memory_read,
    "ctypes.wstring_at": _memory_read,
    "ctypes.cdata": _memory_read,
    "ctypes.dlsym": _symbol,
    "ctypes.dlsym/handle": _symbol,
    "ctypes.dlopen": _library,
    "compile": _compiled,
    "exec": _executed,
    "code.__new__": _code_made,
    "function.__new__": _function_made,
    "import": _imported,
    RECORD_EVENT: _record_sent,
}
CHECKS.update((name, _everything) for name in EVERYTHING)
CHECKS.update({"sys.settrace": _trace_set, "gc.get_objects": _all_objects})
#: Every event the hook looks at; any other returns at the first comparison.
WATCHED = frozenset(CHECKS)
#: Events whose finding is a patch, not a read.
PATCHES = frozenset({"object.__setattr__", "object.__delattr__"})


def _same_source(source: object, filename: str) -> bool:
    """The text compiled is that file's own (an import without a cached ``.pyc``)."""
    if _is(source, str):
        text = str.encode(str.__add__("", source))
    elif _is(source, bytes):
        text = bytes.__add__(b"", source)
    else:
        return False
    try:
        with open(filename, "rb") as file:
            return file.read() == text
    except OSError:
        return False


def _imported_from(code: object, frame: Any) -> bool:
    """``exec`` by importlib of a module whose file is where the code says it comes from."""
    while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
        module = frame.f_locals.get("module")
        origin = getattr(getattr(module, "__spec__", None), "origin", None)
        if _is(origin, str):
            return _realpath(origin) == _realpath(getattr(code, "co_filename", ""))
        frame = frame.f_back
    return False


def _source_of(filename: str) -> str:
    """The module a cached ``__pycache__/name.cpython-311.pyc`` is compiled from."""
    folder, name = os.path.split(filename)
    if os.path.basename(folder) != "__pycache__" or not name.endswith(".pyc"):
        return filename
    return _join(os.path.dirname(folder), name.split(".")[0] + ".py")


def _refuse(state: dict[str, Any], filename: str, event: str) -> None:
    """``--black-box``: refuse a file of the repository (not the evaluator's) with an error
    the importer sees; the first refusal is kept for the probe to send."""
    if kind_of(state, filename) != REPOSITORY:
        return
    file = relative_file(state, _source_of(filename)) or _source_of(filename)
    if state["refused"] is None:
        refused = state["refused"] = {"file": file, "event": event}
        if state["send"] is not None:  # at once: pytest may never send another record
            state["send"]({"type": "refused", **refused})
    raise Refused(
        f"pytest-scoring --black-box: the test process may not load {file} ({event}); "
        "the repository runs only in subprocesses"
    )


# --- who did it ----------------------------------------------------------------------------


def _culprit(state: dict[str, Any], frame: Any) -> Any:
    """The frame whose doing an event is: walking outward from ``frame``, the first that is
    not the standard library (nor pytest's helpers), when it is the repository's; None when
    it is pytest's, pluggy's, the kit's or the interpreter's own."""
    while frame is not None:
        kind = kind_of(state, frame.f_code.co_filename)
        if kind in UNTRUSTED:
            return frame
        if kind not in TRANSPARENT:
            return None
        frame = frame.f_back
    return None


def _report(state: dict[str, Any], kind: str, what: str, frame: Any, event: str) -> None:
    """Record ``what`` as the repository's doing at ``frame``: once per kind of event and
    line (``inspect.stack()`` reads the code of every frame, one signal says so).

    :raises Denied: in a forked child of the test process, whose probe sends nothing: a
        signal found there would never reach the evaluator, so the reach-in is refused.
    """
    filename = frame.f_code.co_filename
    file = relative_file(state, filename)
    detail = f"{what} (from {filename if file is None else file}:{frame.f_lineno})"
    if _getpid() != state["owner"]:
        raise Denied(f"pytest-scoring: refused in a forked child of the test process: {detail}")
    key = (kind, event, filename, frame.f_lineno)
    if key not in state["seen"]:
        state["seen"].add(key)
        state["pending"].append({"kind": kind, "detail": detail, "file": file})


def _caller() -> Any:
    """The frame that raised the event, for a check: it calls this from the hook through
    :func:`_hook_event` (asked only when needed: every frame asked for is an audit event)."""
    return _getframe(4)  # this function, the check, _hook_event, the hook, the frame


def _hook_event(state: dict[str, Any], event: str, args: tuple[Any, ...]) -> None:
    what = state["checks"][event](state, args)
    if what is not None and event in EVERYTHING:
        what = f"called {event}()"
    if what is not None:
        frame = _culprit(state, _getframe(2))  # _hook_event, the hook, the frame
        if frame is not None:
            _report(state, "patched" if event in PATCHES else "tripwire", what, frame, event)


# --- installing it -------------------------------------------------------------------------


def seal(namespace: dict[str, Any]) -> dict[str, Any]:
    """A private copy of a module's namespace: its functions, remade to look names up in the
    copy (with a copy of the builtins), never in the module the repository can change;
    its dictionaries, lists and sets copied too."""
    import builtins

    sealed = dict(namespace)
    sealed["__builtins__"] = dict(vars(builtins))
    for name, value in namespace.items():
        if isinstance(value, (dict, list, set)):
            sealed[name] = type(value)(value)
        elif isinstance(value, _FunctionType) and value.__globals__ is namespace:
            copy = _FunctionType(
                value.__code__, sealed, value.__name__, value.__defaults__, value.__closure__
            )
            copy.__kwdefaults__ = value.__kwdefaults__
            sealed[name] = copy
    for name, value in sealed.items():  # tables of functions point at the copies
        if isinstance(value, dict):
            sealed[name] = {key: _resealed(sealed, item) for key, item in value.items()}
    return sealed


def _resealed(sealed: dict[str, Any], value: object) -> object:
    name = getattr(value, "__name__", None)
    if isinstance(value, _FunctionType) and isinstance(name, str) and name in sealed:
        return sealed[name]
    return value


class Tripwire(NamedTuple):
    """What the launcher and the probe tell the installed hook, and read from it: functions
    of the sealed copy, each bound to the hook's state (bind them once, at the start)."""

    #: ``machinery(*modules)``: the folders (packages) or files of these modules are pytest's,
    #: pluggy's or the kit's.
    machinery: Callable[..., None]
    #: ``wrappers(*paths)``: pytest's helpers that act on their caller's objects
    #: (``monkeypatch``, ``_code``); the walk passes through them.
    wrappers: Callable[..., None]
    #: ``evaluator_paths(paths)``: files and folders of the copy that are the evaluator's.
    evaluator_paths: Callable[[Iterable[str]], None]
    #: ``repository_paths(paths)``: other folders that are the repository's (REPO itself).
    repository_paths: Callable[[Iterable[str]], None]
    #: ``protect(*objects)``: their ``id()``, and reading or writing their memory, is reach-in.
    protect: Callable[..., None]
    #: ``protect_file(fd or path)``: opening this file again (``/proc/self/fd/N``) is reach-in.
    protect_file: Callable[[object], None]
    #: ``black_box()``: refuse every file of the repository from now on.
    black_box: Callable[[], None]
    #: ``quiet()``: a context in which the probe's own reads raise nothing.
    quiet: Callable[[], Any]
    #: ``on_record(verify, send)``: before the channel sends a record, send what
    #: ``verify(final)`` returns (``final``: before the end record) with ``send``.
    on_record: Callable[[Callable[[bool], list[dict[str, Any]]], Callable[[Any], None]], None]
    #: ``drain()``: the signals found since the last call.
    drain: Callable[[], list[dict[str, Any]]]
    #: ``refused_elsewhere(refused)``: a pytest-xdist worker refused a file: sent as this
    #: process's refusal (when it is the first).
    refused_elsewhere: Callable[[object], None]
    #: ``refusal()``: the first file ``--black-box`` refused, or None.
    refusal: Callable[[], dict[str, Any] | None]
    #: ``relative(filename)``: the file relative to the repository, when it is the
    #: repository's (or the evaluator's in the copy).
    relative: Callable[[str], str | None]
    #: ``kind(filename)``: what the file is (:data:`REPOSITORY`, :data:`MACHINERY`…).
    kind: Callable[[object], str]
    #: ``seal(namespace)``: a sealed copy of another module of the kit (:func:`seal`).
    seal: Callable[[dict[str, Any]], dict[str, Any]]


def _machinery_modules(state: dict[str, Any], *modules: object) -> None:
    for module in modules:
        path = getattr(module, "__file__", None)
        if isinstance(path, str):
            package = os.path.basename(path).startswith("__init__.")
            add_place(state, os.path.dirname(path) if package else path, MACHINERY)


def _wrappers(state: dict[str, Any], *paths: str) -> None:
    for path in paths:
        add_place(state, path, WRAPPER)


def _evaluator_paths(state: dict[str, Any], paths: Iterable[str]) -> None:
    for path in paths:
        add_place(state, path, EVALUATOR)


def _repository_paths(state: dict[str, Any], paths: Iterable[str]) -> None:
    for path in paths:
        add_place(state, path, REPOSITORY)


def _protect(state: dict[str, Any], *objects: object) -> None:
    for value in objects:
        common = value is None or isinstance(value, (bool, int, float, str, bytes, tuple))
        if common or isinstance(value, _ModuleType) or id(value) in state["protected_ids"]:
            continue  # values everybody's code holds are never protected
        state["held"].append(value)  # held, so that no id is reused
        state["protected_ids"].add(id(value))
        state["ranges"].append((id(value), id(value) + sys.getsizeof(value)))


def _protect_file(state: dict[str, Any], file: object) -> None:
    info = _stat_of(file)
    if info is not None:
        state["protected_files"].add((info.st_dev, info.st_ino))


def _black_box(state: dict[str, Any]) -> None:
    state["black_box"] = True


@contextmanager
def _quiet(state: dict[str, Any]) -> Iterator[None]:
    ident = _get_ident()
    mine = ident not in state["busy"]
    state["busy"].add(ident)
    try:
        yield
    finally:
        if mine:
            state["busy"].discard(ident)


def _on_record(
    state: dict[str, Any],
    verify: Callable[[bool], list[dict[str, Any]]],
    send: Callable[[Any], None],
) -> None:
    state["verify"], state["send"] = verify, send


def _drain(state: dict[str, Any]) -> list[dict[str, Any]]:
    found, pending = [], state["pending"]
    while pending:  # one by one: the hook may append meanwhile
        found.append(pending.pop(0))
    return found


def _refused_elsewhere(state: dict[str, Any], refused: object) -> None:
    if not (_is(refused, dict) and state["refused"] is None and state["send"] is not None):
        return
    file, event = dict.get(refused, "file"), dict.get(refused, "event")
    if _is(file, str) and _is(event, str):
        found = state["refused"] = {"file": file, "event": event}
        state["send"]({"type": "refused", **found})


def _refusal(state: dict[str, Any]) -> dict[str, Any] | None:
    refused: dict[str, Any] | None = state["refused"]
    return refused


def install(root: str) -> Tripwire:
    """Install the audit hook for the repository at ``root`` (the process's folder), once.

    :returns: what the launcher and the probe tell it (the machinery, what is protected)
        and read from it (the signals found, a refusal).
    """
    code = seal(globals())
    wire: Tripwire = code["_install"](code, root)
    return wire


def _install(code: dict[str, Any], root: str) -> Tripwire:
    """:func:`install`, run in the sealed copy ``code``: the hook and everything it calls
    look names up there."""
    try:
        proc = _stat("/proc/self").st_dev
    except OSError:  # no procfs (not Linux): nothing to reach through it
        proc = -1
    state = places(root)
    state.update(
        checks=CHECKS,
        protected_ids=set(),
        held=[],
        ranges=[],
        protected_files=set(),
        protected_modules=set(),
        busy=set(),
        pending=[],
        seen=set(),
        black_box=False,
        refused=None,
        verify=None,
        send=None,
        proc=proc,
        pids={_getpid(), os.getppid()},
        owner=_getpid(),  # a forked child (os.fork, libc's fork through ctypes) is not it
    )
    add_place(state, os.path.dirname(os.path.abspath(__file__)), MACHINERY)  # the kit
    busy = state["busy"]

    protected_ids = state["protected_ids"]

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event not in WATCHED:
            return
        if event == "builtins.id" and args[0] not in protected_ids:
            return  # the most frequent event: decided at once
        ident = _get_ident()
        if ident in busy:
            return
        busy.add(ident)
        try:
            _hook_event(state, event, args)
        except Denied:
            raise
        except Exception:  # never an error in the test the hook watches
            pass
        finally:
            busy.discard(ident)

    sys.addaudithook(hook)
    names = (
        "_machinery_modules",
        "_wrappers",
        "_evaluator_paths",
        "_repository_paths",
        "_protect",
        "_protect_file",
        "_black_box",
        "_quiet",
        "_on_record",
        "_drain",
        "_refused_elsewhere",
        "_refusal",
        "relative_file",
        "kind_of",
    )
    wire = Tripwire._make([*(_bound(code[name], state) for name in names), seal])
    own = [value for value in code.values() if getattr(value, "__globals__", None) is code]
    _protect(state, hook, *own)
    _guard_memory_functions(state)
    return wire


def _bound(function: Callable[..., Any], state: dict[str, Any]) -> Callable[..., Any]:
    def bound(*args: Any) -> Any:
        return function(state, *args)

    return bound


def _guard_memory_functions(state: dict[str, Any]) -> None:
    """Put checks in front of ctypes' ``memmove``, ``memset`` and ``cast``, which raise no
    audit event, and drop the addresses they are made from (a new one needs a ``dlsym``,
    which raises one)."""
    try:
        import _ctypes
        import ctypes
    except ImportError:  # an interpreter without ctypes: nothing to guard
        return
    move, fill, cast = ctypes.memmove, ctypes.memset, ctypes._cast  # type: ignore[attr-defined]

    def aimed(*addresses: object) -> None:
        with _quiet(state):
            if any(_protected_address(state, _address(ctypes, value)) for value in addresses):
                frame = _culprit(state, _getframe(2))
                if frame is not None:
                    what = "ctypes wrote or cast the memory of one of the probe's protected objects"
                    _report(state, "tripwire", what, frame, "ctypes")

    def memmove(dst: Any, src: Any, count: Any) -> Any:
        aimed(dst, src)
        return move(dst, src, count)

    def memset(dst: Any, value: Any, count: Any) -> Any:
        aimed(dst)
        return fill(dst, value, count)

    def checked_cast(obj: Any, also: Any, typ: Any) -> Any:
        aimed(obj)
        return cast(obj, also, typ)

    setattr(ctypes, "memmove", memmove)  # noqa: B010 - ctypes' declared type is a C function
    setattr(ctypes, "memset", memset)  # noqa: B010
    ctypes._cast = checked_cast  # type: ignore[attr-defined]  # what ctypes.cast() calls
    for module in (ctypes, _ctypes):
        for name in ("_memmove_addr", "_memset_addr", "_cast_addr"):
            vars(module).pop(name, None)
    state["protected_modules"].update({"ctypes", "_ctypes"})
    _protect(state, aimed, memmove, memset, checked_cast, move, fill, cast)


def _address(ctypes: Any, value: object) -> int | None:
    """The address a ctypes argument stands for: an int, a pointer's value, a buffer's."""
    if isinstance(value, int):
        return value
    if isinstance(value, (ctypes.c_void_p, ctypes.c_char_p)):
        pointer = ctypes.c_void_p.from_buffer(value).value
        return pointer if isinstance(pointer, int) else None
    try:
        return int(ctypes.addressof(value))
    except TypeError:
        return None
