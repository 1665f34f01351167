"""Flower's Arrays to and from their .npy bytes, fast, and decoded once per process when shared.

:func:`to_array` and :func:`from_array` give the same ``Array`` and ``ndarray`` as Flower's
``Array(ndarray)`` and ``Array.numpy()`` with each distinct .npy header written or parsed once per process;
:func:`shared_numpy` decodes the copies of one ``Array`` (the local handoff's) once.
"""

from __future__ import annotations

import io

import numpy as np
from flwr.app import Array
from flwr.common.constant import SType

# Arrays to and from Flower's .npy bytes ------------------------------------------------------------
# Flower's Array(ndarray) runs np.save and Array.numpy() np.load per array: most of their cost is the
# .npy header (written, then parsed with ast.literal_eval, every time), not the data. These give the
# same Array (the same bytes: np.save's header from numpy's own format functions, tested) with each
# distinct header written or parsed once per process, and decode to a read-only view of the bytes.
_HEADERS: dict[tuple[str, tuple[int, ...]], bytes] = {}
_PARSED: dict[bytes, tuple[np.dtype, tuple[int, ...], bool]] = {}
_NPY_PREFIX = 10  # magic (6), version (2), header length (2) of a format 1.0 file


def to_array(x: np.ndarray) -> Array:
    """``Array(x)``, the same object Flower builds (``np.save``'s bytes), faster for a C-ordered array."""
    if not (isinstance(x, np.ndarray) and x.flags.c_contiguous and not x.dtype.hasobject):
        return Array(x)
    key = (x.dtype.str, tuple(x.shape))
    header = _HEADERS.get(key)
    if header is None:
        buffer = io.BytesIO()
        np.lib.format.write_array_header_1_0(buffer, np.lib.format.header_data_from_array_1_0(x))
        header = _HEADERS[key] = buffer.getvalue()
    data = b"".join((header, x.reshape(-1).view(np.uint8).data))  # one copy (tobytes + concatenation: two)
    return Array(dtype=str(x.dtype), shape=tuple(x.shape), stype=SType.NUMPY, data=data)


def from_array(array: Array) -> np.ndarray:
    """``array.numpy()`` as a read-only view of its bytes (no copy); copy it to write to it."""
    data = array.data
    if array.stype != SType.NUMPY or data[:8] != b"\x93NUMPY\x01\x00":
        return array.numpy()
    end = _NPY_PREFIX + int.from_bytes(data[8:10], "little")
    header = data[:end]
    parsed = _PARSED.get(header)
    if parsed is None:
        buffer = io.BytesIO(header)
        np.lib.format.read_magic(buffer)
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(buffer)
        parsed = _PARSED[header] = (dtype, tuple(shape), bool(fortran))
    dtype, shape, fortran = parsed
    if dtype.hasobject:
        return array.numpy()
    count = int(np.prod(shape, dtype=np.int64))
    flat = np.frombuffer(data, dtype=dtype, count=count, offset=end)
    return flat.reshape(shape[::-1]).T if fortran else flat.reshape(shape)


# Decoded arrays, shared by the nodes of one process ------------------------------------------------
# With local-wire = "handoff" every node of the process receives the round's model as Arrays over the
# same bytes object; decoding it (numpy's .npy parse) once instead of once per node was 8.5 s of a
# 60-round user-level run. Keyed by the bytes object's id, which the entry pins so the id cannot be reused.
_DECODED: dict[int, tuple[bytes, np.ndarray]] = {}
_DECODED_MAX = 64


def shared_numpy(array: Array) -> np.ndarray:
    """``array.numpy()``, decoded once per bytes object in this process: callers that receive copies
    of one ``Array`` (the handoff's copies share its bytes) get the same ``ndarray``.

    The result is shared: callers must not write to it (copy it, or load it into a module, which
    copies). Arrays over different bytes objects are decoded apart, whatever their content."""
    data = array.data
    hit = _DECODED.get(id(data))
    if hit is not None and hit[0] is data:
        return hit[1]
    decoded = from_array(array).copy()  # writable: torch.from_numpy takes it without a warning
    if len(_DECODED) >= _DECODED_MAX:
        del _DECODED[next(iter(_DECODED))]  # the oldest
    _DECODED[id(data)] = (data, decoded)
    return decoded
