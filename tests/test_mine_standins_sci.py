"""The scipy and librosa stand-ins (curate/mine/shims/scipy_*.py, librosa_*.py).

Reference values were computed with scipy 1.17.1 and librosa 0.11.0 (numpy 2.4.6) in a
separate environment and are written here as literals: the stand-ins must reproduce what
the real functions return, not what our own code happened to compute.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from curate.mine import shims
from test_mine_yield import _standin, imported, mine, pypi


def _close(got, ref, rtol=1e-9, atol=1e-12):
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == np.shape(ref)
    np.testing.assert_allclose(got, np.asarray(ref, dtype=np.float64), rtol=rtol, atol=atol)


# --------------------------------------------------------------------------- values (scipy 1.17.1)
def test_scipy_signal_windows_match_scipy():
    sig = _standin("scipy.signal")
    gw = sig.get_window
    _close(gw("hann", 8), [0.0, 0.14644660940672627, 0.5, 0.8535533905932737, 1.0, 0.8535533905932737, 0.5,
                           0.14644660940672627])
    _close(gw("hamming", 7, fftbins=False), [0.08, 0.31, 0.77, 1.0, 0.77, 0.31, 0.08])
    _close(gw("blackman", 6), [-1.3877787807814457e-17, 0.13, 0.63, 1.0, 0.63, 0.13])
    _close(sig.blackmanharris(7), [6.0000000000001025e-05, 0.05564499999999996, 0.5205749999999999, 1.0,
                                   0.5205750000000002, 0.05564500000000015, 6.0000000000001025e-05])
    cos9 = [0.17364817766693033, 0.49999999999999994, 0.766044443118978, 0.9396926207859083, 1.0,
            0.9396926207859084, 0.766044443118978, 0.49999999999999994, 0.1736481776669307]
    _close(sig.cosine(9), cos9)  # symmetric by default (vocos' scipy.signal.cosine(frame_len))
    _close(gw("cosine", 8), cos9[:8])  # periodic: the first M of M + 1
    _close(gw("boxcar", 4), [1.0] * 4)
    _close(gw("triang", 7, fftbins=False), [0.25, 0.5, 0.75, 1.0, 0.75, 0.5, 0.25])
    _close(gw("triang", 6, fftbins=False), [1 / 6, 0.5, 5 / 6, 5 / 6, 0.5, 1 / 6])
    _close(sig.kaiser(11, 9.0), [0.000914420856691373, 0.035670449145423895, 0.1855554967392841,
                                 0.493453385218953, 0.8425643000236603, 1.0, 0.8425643000236603,
                                 0.493453385218953, 0.1855554967392841, 0.035670449145423895,
                                 0.000914420856691373])
    _close(gw(("gaussian", 2.0), 7), [0.2162651668298873, 0.45783336177161427, 0.7548396019890073,
                                      0.9692332344763441, 0.9692332344763441, 0.7548396019890073,
                                      0.45783336177161427])
    assert gw("hann", 1).tolist() == [1.0] and gw("hann", 0).shape == (0,)
    with pytest.raises(ValueError):
        gw("no-such-window", 8)
    with pytest.raises(ValueError):
        gw("kaiser", 8)  # needs its beta


def test_scipy_signal_fir_design_matches_scipy():
    sig = _standin("scipy.signal")
    _close(sig.firwin(11, 0.3, window=("kaiser", 9.0)),
           [-6.525855740410735e-05, -0.0018703747119107146, 0.006820187017709024, 0.08373052472268618,
            0.243232749289748, 0.3363043444783432, 0.243232749289748, 0.08373052472268618,
            0.006820187017709024, -0.0018703747119107146, -6.525855740410735e-05])
    _close(sig.firwin(9, [0.2, 0.5], pass_zero=False),
           [-0.006349867432237037, -0.07543260011960898, -0.13870306794710965, 0.1926596235464063,
            0.5090812537039996, 0.1926596235464063, -0.13870306794710965, -0.07543260011960898,
            -0.006349867432237037])
    _close(sig.firwin2(16, [0.0, 0.3, 0.35, 1.0], [1.0, 1.0, 0.0, 0.0]),
           [0.003021871339013263, 0.0023570301474690252, -0.007056652720653609, -0.02695974056628967,
            -0.023702716477985084, 0.05164136695556193, 0.19263418981456867, 0.3104866904462164,
            0.3104866904462163, 0.19263418981456845, 0.05164136695556174, -0.023702716477985206,
            -0.026959740566289685, -0.007056652720653598, 0.0023570301474690374, 0.0030218713390132677])
    with pytest.raises(ValueError):
        sig.firwin(10, 0.3, pass_zero=False)  # even length, pass band at Nyquist


def test_scipy_stats_fftpack_special_match_scipy():
    stats = _standin("scipy.stats")
    assert stats.truncnorm.std(a=-2, b=2, loc=0, scale=1) == pytest.approx(0.8796256610342398, rel=1e-12)
    assert stats.truncnorm.std(a=0.5, b=3, loc=1, scale=2) == pytest.approx(0.9981964422198178, rel=1e-12)
    assert stats.truncnorm.mean(a=0.5, b=np.inf) == pytest.approx(1.1410777703680648, rel=1e-12)
    np.random.seed(0)  # draws: numpy's global generator, as scipy's default
    x = stats.truncnorm.rvs(a=-2, b=2, loc=0, scale=0.5, size=(400, 500))
    assert x.shape == (400, 500) and x.dtype == np.float64 and -1.0 <= x.min() and x.max() <= 1.0
    assert x.std() == pytest.approx(0.5 * 0.8796256610342398, rel=0.01)
    c = stats.chi.rvs(4, loc=0, scale=0.1, size=(300, 400))  # speechbrain's quaternion init
    # E[chi_4] = sqrt(2) Gamma(5/2) / Gamma(2) = 1.8799712059732503
    assert c.shape == (300, 400) and c.min() >= 0 and c.mean() == pytest.approx(0.18799712059732503, rel=0.01)
    _close(stats.betabinom.logpmf(np.arange(4)[:, None], 3, np.array([0.5, 1.0]), np.array([1.0, 0.5])),
           [[-0.7827593392496325, -1.945910149055313], [-1.4759065198095775, -1.7635885922613586],
            [-1.7635885922613586, -1.4759065198095775], [-1.945910149055313, -0.7827593392496325]])
    _close(stats.betabinom(4, 2.0, 3.0).pmf(np.arange(0, 6)),  # frozen form (coqui-tts)
           [0.2142857142857142, 0.2857142857142858, 0.25714285714285734, 0.1714285714285715,
            0.07142857142857144, 0.0])

    nfl = _standin("scipy.fftpack").next_fast_len
    ref = {1: 1, 5: 5, 7: 8, 11: 12, 97: 100, 127: 128, 129: 135, 1000: 1000, 1025: 1080, 4097: 4320,
           10007: 10125, 123457: 124416}
    assert {n: nfl(n) for n in ref} == ref

    binom = _standin("scipy.special").binom
    _close([binom(n, k) for n, k in [(5, 2), (10, 4), (4, 6), (5, -1), (2.5, 2), (0.5, 3.3), (3, -1.5)]],
           [10.0, 210.0, 0.0, 0.0, 1.875, 0.03139131574830771, -0.032336242405972396])
    _close(binom(4, range(0, 5, 2)), [1.0, 6.0, 1.0])  # modelscope: binom(margin, range(...))
    assert np.isnan(binom(-3, 2))  # scipy: Gamma(n + 1) has a pole there


# --------------------------------------------------------------------------- values (librosa 0.11.0)
def test_librosa_filters_mel_and_window_match_librosa(monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy.signal", _standin("scipy.signal"))  # librosa_filters' import
    filters = _standin("librosa.filters")
    mel = filters.mel(sr=8000, n_fft=16, n_mels=4)
    assert mel.dtype == np.float32 and mel.shape == (4, 9)
    _close(mel, [[0.0, 0.001991171855479479, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                 [0.0, 0.0001263102312805131, 0.0016980426153168082, 6.795750960009173e-05, 0.0, 0.0, 0.0, 0.0,
                  0.0],
                 [0.0, 0.0, 0.00013976659101899713, 0.0012614937731996179, 0.0006453405949287117, 0.0, 0.0, 0.0,
                  0.0],
                 [0.0, 0.0, 0.0, 0.0, 0.00040878253639675677, 0.0007890777778811753, 0.0005260518519207835,
                  0.00026302592596039176, 0.0]], rtol=1e-6, atol=1e-10)
    _close(filters.mel(sr=8000, n_fft=16, n_mels=3, fmin=100, htk=True, norm=None),
           [[0.0, 0.8978778123855591, 0.3446941375732422, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            [0.0, 0.0, 0.6553058624267578, 0.758357048034668, 0.29531192779541016, 0.0, 0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0, 0.24164293706417084, 0.7046880722045898, 0.8922624588012695, 0.5948416590690613,
             0.29742082953453064, 0.0]], rtol=1e-6, atol=1e-7)
    assert filters.mel(sr=16000, n_fft=400, n_mels=80).shape == (80, 201)
    _close(filters.get_window("hann", 8, fftbins=True), [0.0, 0.14644660940672627, 0.5, 0.8535533905932737,
                                                         1.0, 0.8535533905932737, 0.5, 0.14644660940672627])
    util = _standin("librosa.util")
    assert util.pad_center(np.ones(4), size=8).tolist() == [0, 0, 1, 1, 1, 1, 0, 0]


# --------------------------------------------------------------------------- real mined classes
_BLOCK_AND_RUN = textwrap.dedent("""
    import importlib.abc, sys
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("scipy", "librosa"):
                raise ImportError(name + " is not available to a mined problem")
    sys.meta_path.insert(0, Block())
    import torch
    ns = {"__name__": "__main__"}
    exec(compile(sys.stdin.read(), "<problem>", "exec"), ns)
    torch.manual_seed(0)
    model = ns["Model"](*ns["get_init_inputs"]())
    model(*ns["get_inputs"]())
    print("OK")
""")


@pytest.mark.parametrize("package, version, module, cls, via", [
    # `from scipy.stats import chi`: chi.rvs draws the quaternion moduli (was import_missing)
    ("speechbrain", "1.1.2", "speechbrain.nnet.quaternion_networks.q_linear", "QLinear", "scipy.stats"),
    # `import scipy` then scipy.signal.blackmanharris(window_size) (was import_missing)
    ("nnAudio", "0.3.4", "nnAudio.features.cfp", "CFP", "scipy.signal"),
    # `import librosa` then librosa.filters.mel(...) (was import_missing)
    ("torchlibrosa", "0.1.0", "torchlibrosa.stft", "LogmelFilterBank", "librosa.filters"),
])
def test_classes_needing_scipy_or_librosa_are_mined_with_the_standins(package, version, module, cls, via):
    resolver = pypi(package, version)
    closure = resolver.closure(module, cls)
    assert f"# {via}: torch-only stand-ins written for curate" in closure.source
    prob = mine(resolver, module, cls)
    assert not imported(prob["code"]) & {"scipy", "librosa"}
    p = subprocess.run([sys.executable, "-c", _BLOCK_AND_RUN], input=prob["code"], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip().endswith("OK"), p.stderr[-2000:]


def test_a_package_standin_keeps_its_other_attributes_as_placeholders():
    """``import librosa`` with stand-ins for some sub-modules only: torchlibrosa's
    ``librosa.util.exceptions.ParameterError`` stays a placeholder (ImportError when used),
    not a missing attribute of the namespace."""
    closure = pypi("torchlibrosa", "0.1.0").closure("torchlibrosa.stft", "LogmelFilterBank")
    assert "unavailable('librosa.util.exceptions')" in closure.source
    assert shims.path("scipy") is not None and shims.path("librosa") is not None
