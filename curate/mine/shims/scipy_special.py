"""Stand-in for ``scipy.special``: the binomial coefficient of real arguments (our own code
from scipy's documentation of ``scipy.special.binom``)."""

import math

import numpy as np


def _binom1(n, k):
    """``binom`` of two floats: the product ``prod_{i=1..k} (n - k + i) / i`` for an
    integral ``k >= 0``, 0 for an integral ``k < 0``, NaN for a negative integral ``n``
    (scipy's value there), else
    ``Gamma(n + 1) / (Gamma(k + 1) Gamma(n - k + 1))`` with the reciprocal of a Gamma pole
    taken as 0."""
    if math.isnan(n) or math.isnan(k) or (n < 0 and n == math.floor(n)):
        return math.nan  # Gamma(n + 1) has a pole at a negative integer n
    if k == math.floor(k):
        if k < 0:
            return 0.0
        k = int(k)
        if n == math.floor(n) and n >= 0 and k > n / 2:
            k = int(n) - k  # symmetric, fewer factors
            if k < 0:
                return 0.0
        out = 1.0
        for i in range(1, k + 1):
            out *= (n - (k - i)) / i  # k - i is exact: no cancellation when n is small
        return out

    def rgamma(x):  # 1 / Gamma(x), 0 at the poles
        if x <= 0 and x == math.floor(x):
            return 0.0
        return 1.0 / math.gamma(x)

    return math.gamma(n + 1) * rgamma(k + 1) * rgamma(n - k + 1)


def binom(n, k):
    """Binomial coefficient ``C(n, k)`` for real ``n`` and ``k`` (scipy.special.binom),
    elementwise over the broadcast of the two (lists and ranges included). Returns a
    ``np.float64`` for scalars, else a float64 array."""
    out = np.vectorize(_binom1, otypes=[np.float64])(np.asarray(n, dtype=np.float64),
                                                      np.asarray(k, dtype=np.float64))
    return out[()] if out.ndim == 0 else out
