"""Stand-in for the ``scipy`` package itself, for ``import scipy`` followed by
``scipy.signal.get_window(...)``: the sub-modules with stand-ins (``scipy_signal``,
``scipy_stats``, ...) are found as sub-modules of this one; any other attribute stays a
placeholder that raises ImportError when used."""
