"""Stand-in for ``transformers.generation``: the generation mixin adds no state or forward."""


class GenerationMixin:
    """Text generation helpers (``generate``) are not part of a mined problem."""
