"""The stage harness: what every stage shares.

- :mod:`.options`: each stage's options dataclass (``curate/<stage>/options.py``) and the
  check of options a pipeline YAML gives (unknown keys with the closest allowed name, types);
- :mod:`.stage`: a stage's ``run`` made from its work function and its options: the input
  folder it reads, its clock, its tables and ``stats.json``;
- :mod:`.cli`: the ``curate <stage>`` commands made from the options dataclasses.
"""
