"""The RL reward's implementation (:mod:`.score`: verl's entry points; :mod:`.trl`: TRL's).

Users import :mod:`curate.reward`, which re-exports these, so that the file
``curate/reward.py`` can be loaded by path (verl's ``custom_reward_function.path``) and still
hand out the package's own objects: picklable by reference, sharing one pool of workers.
"""
