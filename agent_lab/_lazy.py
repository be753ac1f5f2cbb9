"""Names a package exports but imports on first use (PEP 562), so importing the package stays cheap.

`agent_lab`, `agent_lab.lab` and `agent_lab.stores` each list their exports as name -> submodule and
get their module `__getattr__` and `__dir__` from `lazy_exports`: a name is imported from its
submodule when first read and kept in the package's namespace from then on; a submodule's own name
(`agent_lab.stores.sqlite`) is imported as the module, as when the package imported it eagerly.
Type checkers read the same names from each package's `if TYPE_CHECKING:` imports.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping, MutableMapping

__all__ = ["lazy_exports"]


def lazy_exports(namespace: MutableMapping[str, Any],
                 exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """(`__getattr__`, `__dir__`) for the package whose `globals()` is `namespace`; `exports` maps
    each lazily imported name to the submodule (relative to the package) that defines it."""
    package = str(namespace["__name__"])

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:  # a submodule read as an attribute without importing it first
            try:
                return importlib.import_module(f".{name}", package)
            except ModuleNotFoundError as missing:
                if missing.name != f"{package}.{name}":
                    raise
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(f".{module}", package), name)
        namespace[name] = value  # found directly from now on
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace["__all__"]))

    return __getattr__, __dir__
