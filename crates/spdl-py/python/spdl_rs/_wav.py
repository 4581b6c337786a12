"""``load_wav`` / ``parse_wav``: WAV samples as a zero-copy NumPy array.

Mirrors SPDL 0.8's ``spdl.io.load_wav``, ``parse_wav`` and ``WAVHeader``.
"""

from __future__ import annotations

from typing import Any

from . import _native
from ._array import _byte_view, _make_array
from ._native import WAVHeader

__all__ = ["load_wav", "parse_wav", "WAVHeader"]


def load_wav(
    data: bytes | bytearray | memoryview,
    time_offset_seconds: float | None = None,
    duration_seconds: float | None = None,
) -> Any:
    """The samples of a WAV file as a NumPy array ``[num_samples, num_channels]``.

    dtype by format: 8-bit PCM ``uint8``, 16-bit ``int16``, 24-bit ``int32`` (converted,
    left-justified: the 24 bits in the top of each ``int32``, as :mod:`scipy.io.wavfile`
    returns them), 32-bit ``int32``, float ``float32`` / ``float64``. Except for 24-bit, the
    array is a view over ``data`` (no copy; copied only if misaligned) and inherits its
    writability. Header parsing runs with the GIL released.

    ``time_offset_seconds`` (default 0) and ``duration_seconds`` (default: to the end) select
    frames ``floor(offset * rate)`` up to ``floor(duration * rate)`` of them, clipped at the
    end. A ``data`` chunk cut short yields the whole frames present.

    Raises ``ValueError`` for invalid WAV data (``"truncated: ..."``, ``"corrupt: ..."``,
    ``"unsupported: ..."`` e.g. ADPCM or 12-bit), a negative or non-finite offset or duration,
    or an offset at or past the end; ``TypeError`` if ``data`` is not bytes-like.

    Mirrors SPDL's ``spdl.io.load_wav`` (which returns an object with
    ``__array_interface__``; a NumPy array has one too).
    """
    view = _byte_view(data)
    info = _native._load_wav(view, time_offset_seconds, duration_seconds)
    return _make_array(view, info, copy=False)


def parse_wav(data: bytes | bytearray | memoryview) -> WAVHeader:
    """The header of a WAV file: a :class:`WAVHeader` (``audio_format``, ``num_channels``,
    ``sample_rate``, ``byte_rate``, ``block_align``, ``bits_per_sample``, ``data_size``).

    Parsed with the GIL released. Raises ``ValueError`` for invalid WAV data, ``TypeError``
    if ``data`` is not bytes-like.

    Mirrors SPDL's ``spdl.io.parse_wav``.
    """
    return _native.parse_wav(data)
