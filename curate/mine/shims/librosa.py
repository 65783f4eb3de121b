"""Stand-in for the ``librosa`` package itself, for ``import librosa`` followed by
``librosa.filters.mel(...)``: ``librosa.filters`` has a stand-in; any other attribute stays
a placeholder that raises ImportError when used."""
