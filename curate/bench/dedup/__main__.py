"""``python -m curate.bench.dedup``: see :mod:`curate.bench.dedup`."""

from curate.bench.dedup import main

main()
