"""Typed reads of record entries: each returns the type the wire schema declares, or raises naming the key.

A RecordDict's value is any record type, and a record's value any of its value types: these read one
entry as the type the schema declares, and raise a ``TypeError`` naming the key when it is something else
(a malformed or foreign message). ``record`` may be any mapping (a record, Flower's node config, {}).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict


def _wrong(key: str, expected: str, value: object) -> TypeError:
    return TypeError(f"record key {key!r}: expected {expected}, got {type(value).__name__} {value!r:.80}")


def array_record(content: RecordDict, key: str) -> ArrayRecord:
    """``content[key]``, an ``ArrayRecord`` (``KeyError`` when absent, ``TypeError`` when another record type)."""
    record = content[key]
    if not isinstance(record, ArrayRecord):
        raise _wrong(key, "an ArrayRecord", record)
    return record


def config_record(content: RecordDict, key: str) -> ConfigRecord:
    """``content[key]``, a ``ConfigRecord`` (``KeyError`` when absent, ``TypeError`` when another record type)."""
    record = content[key]
    if not isinstance(record, ConfigRecord):
        raise _wrong(key, "a ConfigRecord", record)
    return record


def metric_record(content: RecordDict, key: str) -> MetricRecord:
    """``content[key]``, a ``MetricRecord`` (``KeyError`` when absent, ``TypeError`` when another record type)."""
    record = content[key]
    if not isinstance(record, MetricRecord):
        raise _wrong(key, "a MetricRecord", record)
    return record


def _value(record: Mapping[str, object], key: str, default: object) -> object:
    return record[key] if default is None else record.get(key, default)


def read_int(record: Mapping[str, object], key: str, default: int | None = None) -> int:
    """``int(record[key])`` of a number (``default`` when absent, if given; else ``KeyError``)."""
    value = _value(record, key, default)
    if not isinstance(value, int | float):
        raise _wrong(key, "a number", value)
    return int(value)


def read_float(record: Mapping[str, object], key: str, default: float | None = None) -> float:
    """``float(record[key])`` of a number (``default`` when absent, if given; else ``KeyError``)."""
    value = _value(record, key, default)
    if not isinstance(value, int | float):
        raise _wrong(key, "a number", value)
    return float(value)


def read_str(record: Mapping[str, object], key: str, default: str | None = None) -> str:
    """``record[key]``, a string (``default`` when absent, if given; else ``KeyError``)."""
    value = _value(record, key, default)
    if not isinstance(value, str):
        raise _wrong(key, "a string", value)
    return value


def read_list(record: Mapping[str, object], key: str) -> list[Any]:
    """``record[key]``, a list (of a record's scalar type: ints, floats, strings, ...)."""
    value = record[key]
    if not isinstance(value, list):
        raise _wrong(key, "a list", value)
    return value


def read_array(record: Mapping[str, object], key: str) -> Array:
    """``record[key]``, an ``Array``."""
    value = record[key]
    if not isinstance(value, Array):
        raise _wrong(key, "an Array", value)
    return value
