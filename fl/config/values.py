"""What a run config's values mean, read the same way by the checks and by the code that uses them.

The parsers of the keys whose values have a form of their own (``label-names``, ``public-labels``,
``*-options``), the tests a value passes or fails (a user's data file, public documents), the level a
run releases at, and the mechanism a channel's keys name. They raise :class:`ConfigError` on a bad form.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from typing import Any

from fl.config.errors import ConfigError

#: The endings of a user's own data file (``dataset``, ``test-file``, ``public-dataset``, ``data-path``).
USER_FILE_SUFFIXES = (".csv", ".jsonl", ".json", ".parquet", ".jsonl.gz", ".csv.gz")


def is_user_file(name: str) -> bool:
    """True when ``dataset`` names a file rather than a registry entry: a data-file ending, or a path."""
    return name.lower().endswith(USER_FILE_SUFFIXES) or "/" in name or "\\" in name


def has_public(cfg: Mapping[str, Any]) -> bool:
    """Whether the run has public documents (a public split of its dataset by ``public-fraction`` or
    ``public-size``, or another public dataset)."""
    return cfg["public-fraction"] > 0 or cfg["public-size"] > 0 or bool(cfg["public-dataset"])


def level_of(cfg: Mapping[str, Any]) -> str:
    """The level a run releases at, decided here and nowhere else: ``"word"`` or ``"document"`` when
    that level's mechanism is set, else ``"sentence"`` (the config checks refuse two levels at once).

    ``fl.levels.channels`` builds the level's channel from this; modules that prepare a level's inputs
    before any channel exists (the cohort's sentence embeddings or word counts, the short-document
    filter of the data) ask this function too, never the ``*-mechanism`` keys."""
    if cfg["word-mechanism"] != "none":
        return "word"
    if cfg["document-mechanism"] != "none":
        return "document"
    return "sentence"


def label_name_list(text: str) -> list[str]:
    """``label-names``: ``"ham, spam"`` -> ``["ham", "spam"]`` (class ids 0, 1, ... in this order), ``""`` -> ``[]``.

    Guarantees at least 2 distinct, non-empty names when any are given; else a one-line :class:`ConfigError`.
    """
    if not str(text).strip():
        return []
    names = [part.strip() for part in str(text).split(",")]
    if "" in names:
        raise ConfigError(f"label-names = {text!r} has an empty name: list the class names separated by commas")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"label-names = {text!r} names {', '.join(map(repr, repeated))} more than once")
    if len(names) < 2:
        raise ConfigError(f"label-names = {text!r} names one class: a classifier needs at least 2")
    return names


def public_label_pairs(text: str) -> dict[str, str]:
    """``"neg = negative, pos = positive"`` -> ``{"neg": "negative", "pos": "positive"}`` (form only)."""
    pairs: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in str(text).split(","))):
        name, sep, target = (s.strip() for s in part.partition("="))
        if not sep or not name or not target:
            raise ConfigError(f"public-labels: {part!r} is not of the form 'public name = run name'")
        if name in pairs:
            raise ConfigError(f"public-labels: {name!r} is mapped twice")
        pairs[name] = target
    return pairs


def mechanism_options(text: str, key: str = "options") -> dict[str, Any]:
    """Parse ``'out_dim = 64, variant = "paper"'`` (a TOML inline-table body) into keyword arguments."""
    if not text.strip():
        return {}
    try:
        return dict(tomllib.loads(f"o = {{{text}}}")["o"])
    except tomllib.TOMLDecodeError:
        shown = text if len(text) <= 60 else text[:57] + "..."
        raise ConfigError(
            f'{key} = {shown!r} is not TOML values: write name = value (true/false, numbers, "text" in quotes)'
        ) from None


def check_option_types(cls: Any, options: Mapping[str, Any], key: str) -> None:
    """Each option's value has the type its constructor parameter declares: a ``bool`` parameter takes a TOML
    boolean (the string "no" is refused, where ``bool()`` would read it as true), an ``int`` an integer, a
    ``float`` a number, a ``str`` text. Parameters of other types are left to the constructor. ``cls``: a class
    (its constructor's parameters) or a factory (its own)."""
    import inspect
    import typing

    try:  # a class's constructor, or a factory's own signature
        hints = typing.get_type_hints(cls.__init__ if inspect.isclass(cls) else cls)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: nothing to check against
        return
    names = {bool: "true or false", int: "an integer", float: "a number", str: "text in quotes"}
    for name, value in options.items():
        hint = hints.get(name)
        if hint is None:
            continue
        kinds = [a for a in (typing.get_args(hint) or (hint,)) if a is not type(None)]
        if any(a not in names for a in kinds):
            continue
        fits = (
            (bool in kinds and isinstance(value, bool))
            or (int in kinds and isinstance(value, int) and not isinstance(value, bool))
            or (float in kinds and isinstance(value, int | float) and not isinstance(value, bool))
            or (str in kinds and isinstance(value, str))
        )
        if not fits:
            want = " or ".join(names[a] for a in kinds)
            raise ConfigError(f"{key}: {name} = {value!r} must be {want} (e.g. {name} = {_example(kinds[0])})")


def _example(kind: type) -> str:
    return {bool: "true", int: "3", float: "0.5", str: '"text"'}[kind]


def make_mechanism(
    cfg: Mapping[str, Any], channel: str, input_dim: int | None = None, num_classes: int | None = None
) -> Any:
    """Build the ``"sentence"``, ``"label"`` or ``"word"`` mechanism the config names: a registry name, or a
    user's class (``"file.py:Class"``, ``"package.module:Class"``) of the channel's level.

    ``<channel>-options`` are passed to the constructor; ``input_dim`` (the
    mechanism's input dimension, when known) and ``num_classes`` (the run's number
    of classes, for task-aware mechanisms such as ``class_rr``) go to mechanisms
    that take them. Without ``num_classes`` (checking a config before the data is
    read) such a mechanism is built for 2 classes, to check its other parameters.
    """
    import inspect

    import mechanisms  # local import: fl may import mechanisms, never the reverse

    name = cfg[f"{channel}-mechanism"]
    cls = mechanisms.mechanism_class(name, level=channel, key=f"{channel}-mechanism")
    options = mechanism_options(cfg[f"{channel}-options"], f"{channel}-options")
    if name == "none":
        from mechanisms.identity import NoPrivacy  # the registry's "none": the channel's level, no noise

        if options:
            raise ValueError(f"{channel}-mechanism 'none' takes no {channel}-options, got {sorted(options)}")
        return NoPrivacy(level=channel)
    check_option_types(cls, options, f"{channel}-options")
    taken = inspect.signature(cls).parameters
    if input_dim is not None and "input_dim" in taken:
        options.setdefault("input_dim", int(input_dim))
    if "num_classes" in taken:
        options.setdefault("num_classes", 2 if num_classes is None else int(num_classes))
    return mechanisms.create(name, epsilon=cfg[f"{channel}-epsilon"], **options)
