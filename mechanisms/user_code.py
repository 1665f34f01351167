"""A user's class named in the run config: ``"path/to/file.py:Class"`` or ``"package.module:Class"``.

One loader for every key that names user code (``strategy``, ``sentence-mechanism`` and the other
mechanism keys). It lives in the lowest package because every other one may import it: the mechanism
registry (:func:`mechanisms.registry.mechanism_class`), the config's checks (``fl.config.plugins``) and the
ServerApp's strategy loader (``strategies.loading``).

Written here rather than taken from a library: ``importlib`` does the importing; what is added is only
the two spellings, the one-line errors that name the key, and a stable module name for a file, so that the
same file is imported once per process and objects defined in it pickle (checkpoints) under that name.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

#: ``package.module:Name``
MODULE_SPEC = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")
#: ``path/to/file.py:Name`` (any path ending in ``.py``)
FILE_SPEC = re.compile(r"(?P<path>.+\.py):(?P<name>[A-Za-z_]\w*)")


def is_spec(text: str) -> bool:
    """Whether ``text`` names user code (either spelling), rather than a registry name."""
    return bool(FILE_SPEC.fullmatch(text) or MODULE_SPEC.fullmatch(text))


def is_file_spec(text: str) -> bool:
    """Whether ``text`` is ``path/to/file.py:Name``."""
    return bool(FILE_SPEC.fullmatch(text))


def anchor(text: str, *bases: Path) -> str:
    """A file spec whose relative path is found under the first of ``bases`` that holds it, made absolute
    (so it names the same file from any working directory and on every node of the machine); any other
    text unchanged. A file found under none is left as written: :func:`load` names where it looked."""
    match = FILE_SPEC.fullmatch(text)
    if not match or Path(match["path"]).expanduser().is_absolute():
        return text
    for base in bases:
        candidate = (base / match["path"]).resolve()
        if candidate.is_file():
            return f"{candidate}:{match['name']}"
    return text


def module_name(path: Path) -> str:
    """The name a file is imported under: its stem and a digest of its absolute path (one per file)."""
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    stem = re.sub(r"\W", "_", path.stem)
    return f"sanitas_user_{stem}_{digest}"


def shown(spec: str) -> str:
    """How a message names user code: a file spec by its file's name (``loose.py:Loose``, the folder left
    out: the config anchors a relative path to a long absolute one), anything else as written."""
    match = FILE_SPEC.fullmatch(spec)
    return f"{Path(match['path']).name}:{match['name']}" if match else spec


def short(text: str, limit: int = 60) -> str:
    """``text``'s first line, cut from the left to ``limit`` characters (a path keeps its file name): what an
    error line quotes of something a user wrote or a library said, so that the line stays one short line."""
    line = str(text).strip().splitlines()[0] if str(text).strip() else ""
    return line if len(line) <= limit else "..." + line[-(limit - 3) :]


def _import_file(path: Path, key: str) -> Any:
    name = module_name(path)
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{key}: cannot import {str(path)!r} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before executing it: dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        del sys.modules[name]
        raise ValueError(f"{key}: importing {path.name} failed: {type(err).__name__}: {short(str(err), 80)}") from None
    return module


def load(spec: str, key: str = "spec", bases: tuple[Path, ...] = ()) -> Any:
    """The object ``spec`` names: ``"file.py:Name"`` (a relative path is looked up under ``bases``, then the
    working directory) or ``"package.module:Name"`` (imported as usual).

    Raises ``ValueError`` in one line naming ``key``, what was typed and what is wrong.
    """
    match = FILE_SPEC.fullmatch(spec)
    if match:
        written = Path(match["path"]).expanduser()
        tried = [written] if written.is_absolute() else [b / written for b in (*bases, Path.cwd())]
        found = next((p.resolve() for p in tried if p.is_file()), None)
        if found is None:
            where = "there" if written.is_absolute() else "beside the config file or in the working directory"
            raise ValueError(f"{key} = {shown(spec)!r}: no file {short(match['path'], 40)!r} {where}")
        module, attr, source = _import_file(found, key), match["name"], found.name
    elif MODULE_SPEC.fullmatch(spec):
        module_path, _, attr = spec.partition(":")
        try:
            module = importlib.import_module(module_path)
        except ImportError as err:
            raise ValueError(
                f"{key} = {spec!r}: cannot import module {module_path!r} ({short(str(err), 60)})"
            ) from None
        source = module_path
    else:
        raise ValueError(f"{key} = {short(spec)!r}: write 'package.module:Class' or 'path/to/file.py:Class'")
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ValueError(f"{key} = {shown(spec)!r}: {source} defines no {attr!r}") from None
