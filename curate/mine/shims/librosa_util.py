"""Stand-in for ``librosa.util``: the array helpers STFT front ends call on their windows
(our own numpy code from librosa's documentation of ``librosa.util.pad_center`` and
``librosa.util.fix_length``)."""

import numpy as np


def pad_center(data, size=None, axis=-1, **kwargs):
    """``data`` padded on both sides of ``axis`` to length ``size``, centred (the left side
    gets ``(size - n) // 2``); ``kwargs`` go to ``np.pad`` (``mode="constant"`` by default).
    Same dtype, shape with ``size`` along ``axis``. Older librosa took ``size`` by position,
    as it is here.

    Raises:
        ValueError: ``size`` smaller than the data along ``axis``.
    """
    data = np.asarray(data)
    kwargs.setdefault("mode", "constant")
    n = data.shape[axis]
    if size is None or size < n:
        raise ValueError(f"Target size ({size}) must be at least input size ({n})")
    lpad = int((size - n) // 2)
    pads = [(0, 0)] * data.ndim
    pads[axis] = (lpad, int(size - n - lpad))
    return np.pad(data, pads, **kwargs)


def fix_length(data, size=None, axis=-1, **kwargs):
    """``data`` cut or padded at the end of ``axis`` to length ``size`` (``np.pad``
    ``kwargs``, ``mode="constant"`` by default). Same dtype."""
    data = np.asarray(data)
    kwargs.setdefault("mode", "constant")
    n = data.shape[axis]
    if n > size:
        index = [slice(None)] * data.ndim
        index[axis] = slice(0, size)
        return data[tuple(index)]
    if n < size:
        pads = [(0, 0)] * data.ndim
        pads[axis] = (0, int(size - n))
        return np.pad(data, pads, **kwargs)
    return data
