"""Finding a team's lab or registry from a `MODULE:ATTR` or `path/to/file.py:ATTR` reference.

MODULE is imported with the current directory importable (as `python -m` would have it); a path to a
`.py` file is run as a module of its own, with its folder importable so it can import its neighbours.
Every way this can go wrong (no such module or file, an import that raises, no such attribute, a
value of the wrong type, a factory that raises) is one `LabError` whose message names the reference
and the cause on one line.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from ..interrupts import raise_stop_request
from .definition import Lab, LabError, describe_exception

__all__ = ["BUILTIN_LAB", "default_lab", "load_lab", "load_registry", "reference_file", "resolve_reference"]

BUILTIN_LAB = "agent_lab.lab.tickets:lab"  # the demo and reference lab, used when none is configured


def default_lab() -> Lab:
    """The built-in lab (imported without touching sys.path: it ships with the package)."""
    module, _, attribute = BUILTIN_LAB.partition(":")
    lab: Lab = getattr(importlib.import_module(module), attribute)
    return lab


def load_lab(reference: str) -> Lab:
    """The `Lab` that `reference` ("MODULE:ATTR" or "path/to/file.py:ATTR") names (LabError otherwise)."""
    value = resolve_reference(reference)
    if not isinstance(value, Lab):
        raise LabError(f"{reference}: is {_kind(value)}, not an agent_lab.lab.Lab")
    return value


def load_registry(reference: str) -> Any:
    """The `Registry` that `reference` names: a Registry, or a zero-argument callable returning one."""
    from ..registry import Registry

    value = resolve_reference(reference)
    if isinstance(value, Registry):
        return value
    if isinstance(value, type) or not callable(value):
        raise LabError(f"{reference}: is {_kind(value)}, not a Registry or a function returning one")
    try:
        built = value()
    except BaseException as error:  # noqa: BLE001 - the user's factory: any failure (sys.exit too) is bad input
        raise_stop_request(error)  # only the caller's own Ctrl-C stops the command
        raise LabError(f"{reference}: calling it raised {describe_exception(error)}") from None
    if not isinstance(built, Registry):
        raise LabError(f"{reference}: returned {_kind(built)}, not a Registry")
    return built


def resolve_reference(reference: str) -> Any:
    """The object `reference` names, importing its module first (LabError on any failure)."""
    module = _import_location(reference)
    attribute = reference.rpartition(":")[2]
    value: Any = module
    for part in attribute.split("."):
        if not part.isidentifier():
            raise LabError(f"{reference}: {attribute!r} is not an attribute name")
        try:
            value = getattr(value, part)
        except AttributeError:
            raise LabError(f"{reference}: {reference.rpartition(':')[0]} has no attribute {attribute!r}") from None
        except BaseException as error:  # noqa: BLE001 - a property or module __getattr__ of the user's
            raise_stop_request(error)
            raise LabError(f"{reference}: reading {attribute!r} raised {describe_exception(error)}") from None
    return value


def reference_file(reference: str) -> str | None:
    """The source file of the module `reference` names (None when it has none)."""
    return getattr(_import_location(reference), "__file__", None)


def _import_location(reference: str) -> Any:
    if not isinstance(reference, str) or ":" not in reference:
        raise LabError(f"{reference}: expected MODULE:ATTR or path/to/file.py:ATTR")
    location, _, attribute = reference.rpartition(":")
    if not location or not attribute:
        raise LabError(f"{reference}: expected MODULE:ATTR or path/to/file.py:ATTR")
    return _import_file(reference, Path(location)) if _names_a_file(location) else _import_module(reference, location)


def _names_a_file(location: str) -> bool:
    return location.endswith(".py") or "/" in location or "\\" in location


def _import_module(reference: str, name: str) -> Any:
    if not all(part.isidentifier() for part in name.split(".")):
        raise LabError(f"{reference}: {name!r} is not a module name (or a path to a .py file)")
    _make_importable(Path.cwd())
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name is not None and (name == error.name or name.startswith(error.name + ".")):
            raise LabError(f"{reference}: no module named {error.name!r} (from {Path.cwd()})") from None
        raise LabError(f"{reference}: importing {name} raised {describe_exception(error)}") from None
    except BaseException as error:  # noqa: BLE001 - the user's module: any failure (sys.exit too) is bad input
        raise_stop_request(error)
        raise LabError(f"{reference}: importing {name} raised {describe_exception(error)}") from None


def _import_file(reference: str, path: Path) -> Any:
    if path.suffix != ".py":
        raise LabError(f"{reference}: {path} is not a .py file")
    if not path.is_file():
        raise LabError(f"{reference}: no such file {path}")
    resolved = path.resolve()
    digest = hashlib.sha256(str(resolved).encode("utf-8", "surrogateescape")).hexdigest()[:12]
    name = f"_agent_lab_user_{digest}_{resolved.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise LabError(f"{reference}: cannot load {path} as a module")
    module = importlib.util.module_from_spec(spec)
    _make_importable(resolved.parent)
    sys.modules[name] = module  # dataclasses and pickling look modules up here while they load
    try:
        spec.loader.exec_module(module)
    except BaseException as error:  # noqa: BLE001 - any failure (sys.exit too) is bad input
        del sys.modules[name]
        raise_stop_request(error)  # only the caller's own Ctrl-C stops the command
        raise LabError(f"{reference}: importing {path} raised {describe_exception(error)}") from None
    return module


def _make_importable(folder: Path) -> None:
    entry = str(folder)
    if entry not in sys.path:
        sys.path.insert(0, entry)


def _kind(value: Any) -> str:
    if isinstance(value, type):
        return f"the class {value.__name__}"
    if callable(value) and hasattr(value, "__name__"):
        return f"the function {value.__name__}"
    article = "an" if type(value).__name__[:1].lower() in "aeiou" else "a"
    return f"{article} {type(value).__name__}"
