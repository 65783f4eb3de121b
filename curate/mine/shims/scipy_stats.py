"""Stand-in for ``scipy.stats``: the few distributions mined code draws initial weights or
attention priors from (boltz's truncated-normal init, speechbrain's quaternion init,
TTS aligners' beta-binomial priors).

Our own code from the definitions in scipy's documentation (``scipy.stats.truncnorm``,
``scipy.stats.chi``, ``scipy.stats.betabinom``). Results are float64 numpy values: a
``np.float64`` for scalar arguments, an ``np.ndarray`` of the broadcast shape (or ``size``)
otherwise. Random draws use numpy's global generator (``np.random``), as scipy does when
no ``random_state`` is given, so ``np.random.seed`` makes them reproducible (the values
differ from scipy's own draws; the distribution is the same).
"""

import math

import numpy as np
import torch


def _out(x):
    """A float64 array, or a ``np.float64`` when it has no axes (scipy's return types)."""
    x = np.asarray(x, dtype=np.float64)
    return x[()] if x.ndim == 0 else x


def _generator(random_state):
    if random_state is None:
        return np.random.mtrand._rand
    if isinstance(random_state, (int, np.integer)):
        return np.random.RandomState(int(random_state))
    return random_state


def _ndtr(x):
    """Standard normal CDF, elementwise (float64 array)."""
    return torch.special.ndtr(torch.as_tensor(np.asarray(x, dtype=np.float64))).numpy()


def _ndtri(p):
    """Inverse of the standard normal CDF, elementwise (float64 array)."""
    return torch.special.ndtri(torch.as_tensor(np.asarray(p, dtype=np.float64))).numpy()


def _phi(x):
    """Standard normal density; 0 at +-inf, and ``x * phi(x)`` is 0 there too."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(np.isfinite(x), np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi), 0.0)


def _x_phi(x):
    x = np.asarray(x, dtype=np.float64)
    return np.where(np.isfinite(x), np.where(np.isfinite(x), x, 0.0) * _phi(x), 0.0)


class _TruncNorm:
    """``scipy.stats.truncnorm``: the standard normal truncated to ``[a, b]`` (in standard
    units), then shifted by ``loc`` and scaled by ``scale``: its support is
    ``[loc + a * scale, loc + b * scale]``."""

    def _mass(self, a, b):
        # P(a <= Z <= b), taken on the side where the tails are not both near 1
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        flip = a > 0
        return np.where(flip, _ndtr(-a) - _ndtr(-b), _ndtr(b) - _ndtr(a))

    def _std_mean_var(self, a, b):
        z = self._mass(a, b)
        mean = (_phi(a) - _phi(b)) / z
        var = 1.0 + (_x_phi(a) - _x_phi(b)) / z - mean * mean
        return mean, var

    def mean(self, a, b, loc=0.0, scale=1.0):
        """Mean, ``loc + scale (phi(a) - phi(b)) / (Phi(b) - Phi(a))``."""
        m, _ = self._std_mean_var(a, b)
        return _out(loc + scale * m)

    def var(self, a, b, loc=0.0, scale=1.0):
        """Variance, ``scale**2 (1 + (a phi(a) - b phi(b)) / Z - ((phi(a) - phi(b)) / Z)**2)``."""
        _, v = self._std_mean_var(a, b)
        return _out(np.asarray(scale, dtype=np.float64) ** 2 * v)

    def std(self, a, b, loc=0.0, scale=1.0):
        """Standard deviation, the square root of :meth:`var`."""
        return _out(np.sqrt(self.var(a, b, loc, scale)))

    def pdf(self, x, a, b, loc=0.0, scale=1.0):
        """Density ``phi(y) / (scale Z)`` for ``y = (x - loc) / scale`` in ``[a, b]``, else 0."""
        y = (np.asarray(x, dtype=np.float64) - loc) / scale
        inside = (y >= a) & (y <= b)
        return _out(np.where(inside, _phi(y) / (scale * self._mass(a, b)), 0.0))

    def cdf(self, x, a, b, loc=0.0, scale=1.0):
        """Distribution function ``(Phi(y) - Phi(a)) / Z``, clipped to [0, 1]."""
        y = (np.asarray(x, dtype=np.float64) - loc) / scale
        y = np.clip(y, a, b)
        return _out(np.clip((_ndtr(y) - _ndtr(a)) / self._mass(a, b), 0.0, 1.0))

    def rvs(self, a, b, loc=0.0, scale=1.0, size=None, random_state=None):
        """Draws by inverting the CDF: ``u`` uniform on ``[Phi(a), Phi(b)]``, ``Phi^-1(u)``
        (on the mirrored interval where ``a > 0``, for accuracy in the upper tail). Shape
        ``size`` (or that of the broadcast parameters), float64."""
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        shape = np.broadcast(a, b, np.asarray(loc), np.asarray(scale)).shape if size is None else size
        flip = a > 0
        lo, hi = np.where(flip, -b, a), np.where(flip, -a, b)
        plo, phi_ = _ndtr(lo), _ndtr(hi)
        u = _generator(random_state).uniform(size=shape)
        z = np.clip(_ndtri(plo + u * (phi_ - plo)), lo, hi)
        z = np.where(flip, -z, z)
        return _out(loc + scale * z)

    def __call__(self, a, b, loc=0.0, scale=1.0):
        return _Frozen(self, (a, b), loc, scale)


class _Chi:
    """``scipy.stats.chi``: the square root of a chi-squared variable with ``df`` degrees
    of freedom (the length of a ``df``-dimensional standard normal vector), times
    ``scale`` plus ``loc``."""

    def rvs(self, df, loc=0.0, scale=1.0, size=None, random_state=None):
        """Draws ``loc + scale * sqrt(chisquare(df))``; shape ``size``, float64."""
        shape = np.broadcast(np.asarray(df), np.asarray(loc), np.asarray(scale)).shape if size is None else size
        return _out(loc + scale * np.sqrt(_generator(random_state).chisquare(df, size=shape)))

    def mean(self, df, loc=0.0, scale=1.0):
        """Mean, ``loc + scale sqrt(2) Gamma((df + 1) / 2) / Gamma(df / 2)``."""
        df = np.asarray(df, dtype=np.float64)
        lg = torch.lgamma(torch.as_tensor((df + 1) / 2)).numpy() - torch.lgamma(torch.as_tensor(df / 2)).numpy()
        return _out(loc + scale * math.sqrt(2.0) * np.exp(lg))

    def pdf(self, x, df, loc=0.0, scale=1.0):
        """Density ``y**(df-1) exp(-y**2/2) / (2**(df/2-1) Gamma(df/2)) / scale`` for y >= 0."""
        y = (np.asarray(x, dtype=np.float64) - loc) / scale
        df = np.asarray(df, dtype=np.float64)
        logc = (df / 2 - 1) * math.log(2.0) + torch.lgamma(torch.as_tensor(df / 2)).numpy()
        with np.errstate(divide="ignore", invalid="ignore"):
            d = np.exp((df - 1) * np.log(np.where(y > 0, y, 1.0)) - 0.5 * y * y - logc) / scale
        return _out(np.where(y > 0, d, 0.0))

    def __call__(self, df, loc=0.0, scale=1.0):
        return _Frozen(self, (df,), loc, scale)


def _lgamma(x):
    return torch.lgamma(torch.as_tensor(np.asarray(x, dtype=np.float64))).numpy()


def _lbeta(a, b):
    return _lgamma(a) + _lgamma(b) - _lgamma(a + b)


class _BetaBinom:
    """``scipy.stats.betabinom``: a binomial count of ``n`` trials whose success probability
    is Beta(``a``, ``b``) distributed; support ``0 .. n`` (shifted by ``loc``)."""

    def logpmf(self, k, n, a, b, loc=0):
        """``log C(n, k) + log B(k + a, n - k + b) - log B(a, b)``; ``-inf`` off the support
        (a non-integral ``k``, or outside ``0 .. n``). Broadcasts its arguments."""
        k = np.asarray(k, dtype=np.float64) - loc
        n = np.asarray(n, dtype=np.float64)
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        on = (k >= 0) & (k <= n) & (k == np.floor(k))
        kk = np.where(on, k, 0.0)
        val = (_lgamma(n + 1) - _lgamma(kk + 1) - _lgamma(n - kk + 1)
               + _lbeta(kk + a, n - kk + b) - _lbeta(a, b))
        return _out(np.where(on, val, -np.inf))

    def pmf(self, k, n, a, b, loc=0):
        """Probability of ``k``, ``exp`` of :meth:`logpmf`."""
        return _out(np.exp(self.logpmf(k, n, a, b, loc)))

    def mean(self, n, a, b, loc=0):
        """Mean, ``n a / (a + b)``."""
        return _out(loc + np.asarray(n, dtype=np.float64) * a / (np.asarray(a, dtype=np.float64) + b))

    def __call__(self, n, a, b, loc=0):
        return _Frozen(self, (n, a, b), loc, None)


class _Frozen:
    """A distribution with its parameters fixed (``scipy.stats.betabinom(n, a, b)``): its
    methods take only the point (or, for ``rvs``, the size)."""

    def __init__(self, dist, shapes, loc, scale):
        self.dist, self.args = dist, tuple(shapes) + ((loc,) if scale is None else (loc, scale))

    def __getattr__(self, name):
        if name.startswith("__"):  # copy, pickle: not a distribution method
            raise AttributeError(name)
        method = getattr(self.dist, name)
        if name in ("rvs", "mean", "var", "std"):
            return lambda *args, **kwargs: method(*self.args, *args, **kwargs)
        return lambda x, *args, **kwargs: method(x, *self.args, *args, **kwargs)


truncnorm = _TruncNorm()
chi = _Chi()
betabinom = _BetaBinom()
