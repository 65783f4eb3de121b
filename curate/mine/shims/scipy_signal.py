"""Stand-in for ``scipy.signal`` (and ``scipy.signal.windows``): window functions and FIR
filter design, as mined audio code uses them to build fixed STFT, CQT and filter-bank
kernels in a constructor.

Our own numpy code written from the definitions in scipy's documentation
(https://docs.scipy.org/doc/scipy/reference/signal.windows.html, ``scipy.signal.get_window``,
``scipy.signal.firwin``, ``scipy.signal.firwin2``). Every function returns a float64
``np.ndarray`` of shape ``(M,)`` (``(numtaps,)`` for the filters), as scipy does.
"""

import math

import numpy as np


def _window_length(M):
    """``M`` as a non-negative int; raises ValueError for a negative or non-integral length."""
    if int(M) != M or M < 0:
        raise ValueError("Window length M must be a non-negative integer")
    return int(M)


def _sym_window(M, sym, body):
    """Apply ``body(n)`` (symmetric definition of length n) for ``M`` points: ``sym=False`` is
    the periodic window for spectral analysis, the first ``M`` points of the symmetric window
    of length ``M + 1`` (scipy's documented meaning of ``sym``)."""
    M = _window_length(M)
    if M <= 1:
        return np.ones(M)
    if sym:
        return np.asarray(body(M), dtype=np.float64)
    return np.asarray(body(M + 1), dtype=np.float64)[:-1]


def general_cosine(M, a, sym=True):
    """Generic weighted sum of cosines, ``w[n] = sum_k (-1)**k a[k] cos(2 pi k n / (M - 1))``
    (scipy.signal.windows.general_cosine). Shape ``(M,)``, float64."""

    def body(n):
        x = 2.0 * np.pi * np.arange(n) / (n - 1)
        return sum(((-1) ** k) * c * np.cos(k * x) for k, c in enumerate(a))

    return _sym_window(M, sym, body)


def general_hamming(M, alpha, sym=True):
    """``alpha - (1 - alpha) cos(2 pi n / (M - 1))`` (scipy.signal.windows.general_hamming)."""
    return general_cosine(M, [alpha, 1.0 - alpha], sym)


def hann(M, sym=True):
    """Hann window, ``0.5 - 0.5 cos(2 pi n / (M - 1))`` (scipy.signal.windows.hann)."""
    return general_cosine(M, [0.5, 0.5], sym)


def hamming(M, sym=True):
    """Hamming window, ``0.54 - 0.46 cos(2 pi n / (M - 1))`` (scipy.signal.windows.hamming)."""
    return general_cosine(M, [0.54, 0.46], sym)


def blackman(M, sym=True):
    """Blackman window, coefficients 0.42, 0.5, 0.08 (scipy.signal.windows.blackman)."""
    return general_cosine(M, [0.42, 0.50, 0.08], sym)


def blackmanharris(M, sym=True):
    """Minimum 4-term Blackman-Harris window (scipy.signal.windows.blackmanharris)."""
    return general_cosine(M, [0.35875, 0.48829, 0.14128, 0.01168], sym)


def nuttall(M, sym=True):
    """Minimum 4-term Blackman-Harris window after Nuttall (scipy.signal.windows.nuttall)."""
    return general_cosine(M, [0.3635819, 0.4891775, 0.1365995, 0.0106411], sym)


def flattop(M, sym=True):
    """Flat top window (scipy.signal.windows.flattop)."""
    return general_cosine(M, [0.21557895, 0.41663158, 0.277263158, 0.083578947, 0.006947368], sym)


def boxcar(M, sym=True):
    """Rectangular window, all ones (scipy.signal.windows.boxcar)."""
    return np.ones(_window_length(M))


def cosine(M, sym=True):
    """Simple cosine (sine) window, ``sin(pi (n + 0.5) / M)`` (scipy.signal.windows.cosine)."""
    return _sym_window(M, sym, lambda n: np.sin(np.pi / n * (np.arange(n) + 0.5)))


def bartlett(M, sym=True):
    """Bartlett window, triangular with zero end points (scipy.signal.windows.bartlett)."""
    return _sym_window(M, sym, lambda n: 1.0 - np.abs(2.0 * np.arange(n) / (n - 1) - 1.0))


def triang(M, sym=True):
    """Triangular window without zero end points (scipy.signal.windows.triang): for odd
    ``M`` the ramp is ``2 k / (M + 1)``, for even ``M`` it is ``(2 k - 1) / M``,
    ``k = 1 .. ceil(M / 2)``, mirrored."""

    def body(n):
        k = np.arange(1, (n + 1) // 2 + 1)
        if n % 2 == 0:
            ramp = (2 * k - 1.0) / n
            return np.concatenate([ramp, ramp[::-1]])
        ramp = 2 * k / (n + 1.0)
        return np.concatenate([ramp, ramp[-2::-1]])

    return _sym_window(M, sym, body)


def kaiser(M, beta, sym=True):
    """Kaiser window, ``I0(beta sqrt(1 - (2 n / (M - 1) - 1)**2)) / I0(beta)``
    (scipy.signal.windows.kaiser)."""

    def body(n):
        r = 2.0 * np.arange(n) / (n - 1) - 1.0
        return np.i0(beta * np.sqrt(np.clip(1.0 - r * r, 0.0, None))) / np.i0(float(beta))

    return _sym_window(M, sym, body)


def gaussian(M, std, sym=True):
    """Gaussian window, ``exp(-0.5 ((n - (M - 1) / 2) / std)**2)`` (scipy.signal.windows.gaussian)."""
    return _sym_window(M, sym, lambda n: np.exp(-0.5 * ((np.arange(n) - (n - 1) / 2.0) / std) ** 2))


# name (and the aliases scipy's get_window documents) -> (window function, parameters needed);
# one statement, so that a closure copying get_window copies the whole table
_WINDOWS = {name: (fn, nargs) for names, fn, nargs in [
    (("boxcar", "box", "ones", "rect", "rectangular"), boxcar, 0),
    (("triang", "triangle", "tri"), triang, 0),
    (("bartlett", "bart", "brt"), bartlett, 0),
    (("hann", "hanning", "han"), hann, 0),
    (("hamming", "hamm", "ham"), hamming, 0),
    (("blackman", "black", "blk"), blackman, 0),
    (("blackmanharris", "blackharr", "bkh"), blackmanharris, 0),
    (("nuttall", "nutl", "nut"), nuttall, 0),
    (("flattop", "flat", "flt"), flattop, 0),
    (("cosine", "halfcosine"), cosine, 0),
    (("kaiser", "ksr"), kaiser, 1),
    (("gaussian", "gauss", "gss"), gaussian, 1),
    (("general_hamming",), general_hamming, 1),
    (("general_cosine",), general_cosine, 1),
] for name in names}


def get_window(window, Nx, fftbins=True):
    """A window of ``Nx`` points by name (scipy.signal.get_window).

    ``window`` is a name (``"hann"``), a tuple of a name and its parameters
    (``("kaiser", 8.0)``, ``("gaussian", std)``) or a float (a Kaiser window's beta).
    ``fftbins=True`` (the default) gives the periodic window, for use with an FFT;
    ``False`` the symmetric one. Returns a float64 array of shape ``(Nx,)``.

    Raises:
        ValueError: an unknown window name, or a window that needs parameters given none.
    """
    if isinstance(window, (int, float)) and not isinstance(window, bool):
        name, args = "kaiser", (float(window),)
    elif isinstance(window, str):
        name, args = window, ()
    elif isinstance(window, tuple) and window and isinstance(window[0], str):
        name, args = window[0], tuple(window[1:])
    else:
        raise ValueError("The 'window' argument must be a string, a tuple or a float")
    spec = _WINDOWS.get(name.lower())
    if spec is None:
        raise ValueError(f"Unknown window type: {name!r}")
    fn, nargs = spec
    if nargs and len(args) < nargs:
        raise ValueError(f"The '{name}' window needs one or more parameters -- pass a tuple.")
    return fn(Nx, *args[:nargs], sym=not fftbins)


def kaiser_atten(numtaps, width):
    """Attenuation in dB of a Kaiser FIR filter, ``2.285 (numtaps - 1) pi width + 7.95``
    (scipy.signal.kaiser_atten; ``width`` relative to the Nyquist frequency)."""
    return 2.285 * (numtaps - 1) * np.pi * width + 7.95


def kaiser_beta(a):
    """Kaiser window beta for attenuation ``a`` dB (scipy.signal.kaiser_beta, Kaiser's formula)."""
    if a > 50:
        return 0.1102 * (a - 8.7)
    if a > 21:
        return 0.5842 * (a - 21) ** 0.4 + 0.07886 * (a - 21)
    return 0.0


def _nyquist(fs, nyq=None):
    if nyq is not None:
        return float(nyq)
    return 1.0 if fs is None else 0.5 * float(fs)


def firwin(numtaps, cutoff, width=None, window="hamming", pass_zero=True, scale=True, nyq=None, fs=None):
    """Linear-phase FIR filter by the window method (scipy.signal.firwin).

    ``cutoff``: one edge or an increasing list of band edges (in units of ``fs``; relative
    to the Nyquist frequency when ``fs`` is None). ``pass_zero`` True or ``"lowpass"`` /
    ``"bandstop"`` starts with a pass band at 0. Each pass band adds the difference of two
    ideal low-pass (sinc) responses; the sum is multiplied by the symmetric ``window`` (a
    Kaiser window of the attenuation ``width`` implies, when ``width`` is given) and, with
    ``scale``, normalized to gain 1 at the centre of the first pass band (0 when it starts
    at 0, Nyquist when it ends there). Returns float64 coefficients of shape ``(numtaps,)``.

    Raises:
        ValueError: edges outside (0, Nyquist) or not increasing, or an even ``numtaps``
            with a pass band at the Nyquist frequency.
    """
    nyq = _nyquist(fs, nyq)
    cutoff = np.atleast_1d(np.asarray(cutoff, dtype=np.float64)) / nyq
    if cutoff.ndim != 1 or cutoff.size == 0:
        raise ValueError("At least one cutoff frequency must be given.")
    if cutoff.min() <= 0 or cutoff.max() >= 1:
        raise ValueError("Invalid cutoff frequency: frequencies must be greater than 0 and less than fs/2.")
    if np.any(np.diff(cutoff) <= 0):
        raise ValueError("Invalid cutoff frequencies: the frequencies must be strictly increasing.")
    if width is not None:
        window = ("kaiser", kaiser_beta(kaiser_atten(numtaps, float(width) / nyq)))
    if isinstance(pass_zero, str):
        pass_zero = pass_zero in ("lowpass", "bandstop")
    pass_nyquist = bool(cutoff.size % 2) != bool(pass_zero)
    if pass_nyquist and numtaps % 2 == 0:
        raise ValueError("A filter with an even number of coefficients must have zero response at the Nyquist frequency.")
    edges = np.concatenate([[0.0] if pass_zero else [], cutoff, [1.0] if pass_nyquist else []])
    bands = edges.reshape(-1, 2)
    m = np.arange(numtaps) - 0.5 * (numtaps - 1)
    h = np.zeros(numtaps)
    for left, right in bands:
        h += right * np.sinc(right * m) - left * np.sinc(left * m)
    h *= get_window(window, numtaps, fftbins=False)
    if scale:
        left, right = bands[0]
        f = 0.0 if left == 0 else (1.0 if right == 1 else 0.5 * (left + right))
        h /= np.sum(h * np.cos(np.pi * m * f))
    return h


def firwin2(numtaps, freq, gain, nfreqs=None, window="hamming", nyq=None, antisymmetric=False, fs=None):
    """FIR filter by the frequency-sampling method (scipy.signal.firwin2).

    The desired response is ``gain`` interpolated linearly at ``freq`` (non-decreasing, from
    0 to the Nyquist frequency; a frequency given twice is a step) on ``nfreqs`` points
    (default ``1 + 2**ceil(log2(numtaps))``), delayed by ``(numtaps - 1) / 2`` samples; its
    inverse real FFT, cut to ``numtaps`` and multiplied by the symmetric ``window``, is the
    filter. Only the symmetric (type I/II) filters are covered. Returns float64 coefficients
    of shape ``(numtaps,)``.

    Raises:
        ValueError: mismatched ``freq``/``gain``, ``freq`` not from 0 to Nyquist or
            decreasing, an even ``numtaps`` with a non-zero gain at Nyquist.
        NotImplementedError: ``antisymmetric=True``.
    """
    if antisymmetric:
        raise NotImplementedError("firwin2 stand-in: antisymmetric filters are not covered")
    nyq = _nyquist(fs, nyq)
    freq = np.asarray(freq, dtype=np.float64)
    gain = np.asarray(gain, dtype=np.float64)
    if freq.ndim != 1 or freq.shape != gain.shape:
        raise ValueError("freq and gain must be of same length.")
    if freq[0] != 0 or freq[-1] != nyq:
        raise ValueError("freq must start with 0 and end with fs/2.")
    d = np.diff(freq)
    if np.any(d < 0):
        raise ValueError("The values in freq must be nondecreasing.")
    if numtaps % 2 == 0 and gain[-1] != 0:
        raise ValueError("A Type II filter must have zero gain at the Nyquist frequency.")
    if nfreqs is None:
        nfreqs = 1 + 2 ** int(math.ceil(math.log2(numtaps)))
    if np.any(d == 0):
        # a repeated frequency is a jump: move its two copies apart by a rounding step so
        # that the interpolation sees the gain before and after it
        freq = freq.copy()
        eps = np.finfo(float).eps * nyq
        for k in range(len(freq) - 1):
            if freq[k] == freq[k + 1]:
                freq[k] -= eps
                freq[k + 1] += eps
    x = np.linspace(0.0, nyq, nfreqs)
    fx = np.interp(x, freq, gain)
    delay = np.exp(-(numtaps - 1) / 2.0 * 1j * np.pi * x / nyq)
    out = np.fft.irfft(fx * delay)[:numtaps]
    if window is not None:
        out = out * get_window(window, numtaps, fftbins=False)
    return out
