"""Resolving ``"module.path:callable"`` references (tools, graders, factories)."""

from __future__ import annotations

import importlib
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


def resolve_callable(ref: str) -> Callable[..., Any]:
    """Import ``module.path:attr.path`` and return it; ValueError says what is wrong."""
    module_name, sep, attr_path = ref.partition(":")
    if not sep or not module_name or not attr_path:
        raise ValueError(f"'{ref}' is not of the form module.path:callable")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise ValueError(
                f"cannot import module '{module_name}': no module named '{exc.name}'"
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
