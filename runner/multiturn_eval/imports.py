"""Resolving ``"module.path:callable"`` references (tools, graders, factories)."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any


def add_import_paths(paths: Iterable[Path]) -> None:
    """Put directories at the front of ``sys.path`` (once each)."""
    for path in paths:
        entry = str(path.resolve())
        if entry not in sys.path:
            sys.path.insert(0, entry)


def _interpreter_dirs() -> tuple[str, ...]:
    """Where the interpreter keeps the standard library and installed packages."""
    return tuple({str(Path(p).resolve()) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})


def search_dirs() -> list[str]:
    """The directories of ``sys.path`` a user put there (not the interpreter's own)."""
    own = _interpreter_dirs()
    shown: list[str] = []
    for entry in sys.path:
        path = str(Path(entry or ".").resolve())
        if any(path == d or path.startswith(d + os.sep) for d in own) or path in shown:
            continue
        shown.append(path)
    return shown


def not_found_hint(name: str) -> str:
    """Why ``name`` (a module, or the package above it) was not found, and what to do."""
    top, _, rest = name.partition(".")
    if rest:  # the package was found, the module inside it not
        try:
            package = importlib.import_module(name.rpartition(".")[0])
        except Exception:  # only a hint: the error itself is said already
            package = None
        where = getattr(package, "__path__", None)
        if where:
            return f"package '{name.rpartition('.')[0]}' at {', '.join(where)} has no '{name.rpartition('.')[2]}'"
    dirs = search_dirs()
    looked = ", ".join(dirs) if dirs else "no directory of yours"
    return (
        f"looked in {looked} and the interpreter's own directories; the suite file's directory "
        f"and the current directory are always on the path: run from the directory that holds "
        f"'{top}', usually the repository root, or add it to PYTHONPATH"
    )


def resolve_callable(ref: str) -> Callable[..., Any]:
    """Import ``module.path:attr.path`` and return it; ValueError says what is wrong."""
    module_name, sep, attr_path = ref.partition(":")
    if not sep or not module_name or not attr_path:
        raise ValueError(f"'{ref}' is not of the form module.path:callable")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise ValueError(
                f"cannot import module '{module_name}': no module named '{exc.name}' "
                f"({not_found_hint(exc.name)})"
            ) from None
        raise ValueError(f"cannot import module '{module_name}': {exc}") from None
    except Exception as exc:  # the user's module raised while importing
        raise ValueError(
            f"importing module '{module_name}' raised {type(exc).__name__}: {exc}"
        ) from None
    except SystemExit as exc:  # e.g. a grader script that parses its argv at import
        raise ValueError(
            f"importing module '{module_name}' called sys.exit({exc.code!r}) "
            '(code at module level runs at import; put it under `if __name__ == "__main__":`)'
        ) from None
    except KeyboardInterrupt:  # the module's own (Ctrl-C during a run is Interrupted, not this)
        raise ValueError(f"importing module '{module_name}' raised KeyboardInterrupt") from None
    target: Any = module
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ValueError(f"module '{module_name}' has no attribute '{attr_path}'") from None
    if not callable(target):
        raise ValueError(f"'{ref}' is a {type(target).__name__}, not a callable")
    return target  # type: ignore[no-any-return]


def one_argument_problem(fn: Callable[..., Any], role: str) -> str | None:
    """Why ``fn`` cannot be called with the one argument the runner passes (None: it can).

    ``role`` says what the argument is: ``"the factory is called with one argument,
    the test case's CaseContext"``. A callable whose signature Python cannot tell
    (some builtins) passes: calling it is the only test.
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(None)
    except TypeError as exc:
        name = getattr(fn, "__qualname__", None) or type(fn).__name__
        return f"{role}; {name}{signature} cannot take it ({exc})"
    return None
