"""Stand-in for ``scipy.fftpack``: ``next_fast_len``, which FFT-convolution layers call to
pad a sequence to a fast transform size (our own code from scipy's documentation)."""


def next_fast_len(target):
    """The smallest 5-smooth number (``2**i * 3**j * 5**k``) that is ``>= target``
    (scipy.fftpack.next_fast_len: the sizes FFTPACK transforms fastest). ``target`` is a
    positive int; returns an int (``next_fast_len(97) == 100``).

    Raises:
        ValueError: ``target`` below 1.
        TypeError: a non-integral ``target``.
    """
    if int(target) != target:
        raise TypeError(f"target must be an integer, got {target!r}")
    target = int(target)
    if target < 1:
        raise ValueError("Target cannot be negative or zero")
    if target <= 6 or not target & (target - 1):
        return target  # 1..6 and powers of 2 are 5-smooth
    best = 1 << (target - 1).bit_length()  # a power of 2 always works
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            # the smallest power of 2 lifting p35 to at least target
            quotient = -(-target // p35)
            n = p35 * (1 << (quotient - 1).bit_length())
            if n == target:
                return n
            best = min(best, n)
            p35 *= 3
        p5 *= 5
    return best
