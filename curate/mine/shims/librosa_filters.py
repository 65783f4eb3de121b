"""Stand-in for ``librosa.filters``: the mel filter bank and the window helper that audio
front ends call in their constructors.

Our own numpy code from librosa's documentation (``librosa.filters.mel``,
``librosa.mel_frequencies``, ``librosa.hz_to_mel``, ``librosa.filters.get_window``,
https://librosa.org/doc/latest/filters.html).
"""

import numpy as np

from scipy.signal import get_window as _scipy_get_window


def hz_to_mel(frequencies, htk=False):
    """Hz to mels (librosa.hz_to_mel). ``htk``: ``2595 log10(1 + f / 700)``; otherwise the
    Slaney scale of the Auditory Toolbox, linear below 1 kHz (``3 f / 200``) and logarithmic
    above (27 mels per factor 6.4). Float64 array of the input's shape (a float for a scalar)."""
    f = np.asanyarray(frequencies, dtype=np.float64)
    if htk:
        return 2595.0 * np.log10(1.0 + f / 700.0)
    f_sp = 200.0 / 3
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0
    with np.errstate(divide="ignore", invalid="ignore"):
        log_part = min_log_mel + np.log(np.maximum(f, min_log_hz) / min_log_hz) / logstep
    return np.where(f >= min_log_hz, log_part, f / f_sp)


def mel_to_hz(mels, htk=False):
    """Mels to Hz, the inverse of :func:`hz_to_mel` (librosa.mel_to_hz)."""
    m = np.asanyarray(mels, dtype=np.float64)
    if htk:
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)
    f_sp = 200.0 / 3
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), f_sp * m)


def mel_frequencies(n_mels=128, fmin=0.0, fmax=11025.0, htk=False):
    """``n_mels`` frequencies (Hz) evenly spaced on the mel scale from ``fmin`` to ``fmax``
    (librosa.mel_frequencies). Float64 array of shape ``(n_mels,)``."""
    mels = np.linspace(hz_to_mel(fmin, htk=htk), hz_to_mel(fmax, htk=htk), n_mels)
    return mel_to_hz(mels, htk=htk)


def _normalize_rows(weights, norm):
    """Rows scaled to unit ``norm`` (a p-norm order or ``np.inf``), as librosa.util.normalize
    does along the last axis; all-zero rows stay zero."""
    if norm == np.inf:
        length = np.max(np.abs(weights), axis=-1, keepdims=True)
    elif norm == -np.inf:
        length = np.min(np.abs(weights), axis=-1, keepdims=True)
    elif norm == 0:
        length = np.sum(weights != 0, axis=-1, keepdims=True).astype(weights.dtype)
    else:
        length = np.sum(np.abs(weights) ** norm, axis=-1, keepdims=True) ** (1.0 / norm)
    tiny = np.finfo(weights.dtype).tiny
    return np.where(length < tiny, 0.0, weights / np.where(length < tiny, 1.0, length)).astype(weights.dtype)


def mel(sr=22050, n_fft=2048, n_mels=128, fmin=0.0, fmax=None, htk=False, norm="slaney", dtype=np.float32):
    """Mel filter bank (librosa.filters.mel): ``n_mels`` triangular filters over the
    ``1 + n_fft // 2`` FFT bins of a signal sampled at ``sr`` Hz. Filter ``i`` rises from
    mel frequency ``i`` to ``i + 1`` and falls to ``i + 2`` of ``n_mels + 2`` points spaced
    evenly on the mel scale (Slaney's, or HTK's with ``htk=True``) from ``fmin`` to ``fmax``
    (default ``sr / 2``). ``norm="slaney"`` divides each filter by its width in Hz (``2 /
    (f[i+2] - f[i])``, constant energy per channel); a number normalizes each row to that
    p-norm; None leaves peaks at 1. Returns an array of shape ``(n_mels, 1 + n_fft // 2)``
    and dtype ``dtype`` (float32 by default).

    Current librosa takes ``sr`` and ``n_fft`` by keyword only; older releases, which much
    mined code was written for, also by position, which is accepted here.

    Raises:
        ValueError: an unsupported ``norm``.
    """
    if fmax is None:
        fmax = float(sr) / 2
    n_bins = 1 + int(n_fft) // 2
    fftfreqs = np.linspace(0.0, float(sr) / 2, n_bins)
    mel_f = mel_frequencies(int(n_mels) + 2, fmin=fmin, fmax=fmax, htk=htk)
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fftfreqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    if isinstance(norm, str):
        if norm != "slaney":
            raise ValueError(f"Unsupported norm={norm}")
        weights *= (2.0 / (mel_f[2:] - mel_f[:-2]))[:, None]
    elif norm is not None:
        weights = _normalize_rows(weights, norm)
    return weights.astype(dtype)


def get_window(window, Nx, fftbins=True):
    """A window of ``Nx`` points (librosa.filters.get_window): a callable is called with
    ``Nx``; a name, tuple or number goes to ``scipy.signal.get_window`` (periodic when
    ``fftbins``); an array of length ``Nx`` is returned as it is. Float64 array ``(Nx,)``
    for the named windows.

    Raises:
        ValueError: an array of another length, or an unknown window.
    """
    if callable(window):
        return window(Nx)
    if isinstance(window, (str, tuple)) or np.isscalar(window):
        return _scipy_get_window(window, Nx, fftbins=fftbins)
    if isinstance(window, (np.ndarray, list)):
        if len(window) == Nx:
            return np.asarray(window)
        raise ValueError(f"Window size mismatch: {len(window):d} != {Nx:d}")
    raise ValueError(f"Invalid window specification: {window!r}")
