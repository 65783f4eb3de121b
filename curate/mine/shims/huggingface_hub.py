"""Stand-in for ``huggingface_hub``: no hub access. Mixins add nothing; downloads raise
``ConnectionError`` (the synthesizer records such modules as ``needs_network``)."""


class PyTorchModelHubMixin:
    """Saving to and loading from the Hub is not part of a problem."""

    def __init_subclass__(cls, *args, **kwargs):
        super().__init_subclass__()

    def save_pretrained(self, *args, **kwargs):
        raise NotImplementedError("saving to the Hugging Face Hub is not part of a problem")

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        raise ConnectionError("from_pretrained: a mined problem does not download from the Hugging Face Hub")

    def push_to_hub(self, *args, **kwargs):
        raise ConnectionError("push_to_hub: a mined problem does not upload to the Hugging Face Hub")


class ModelHubMixin(PyTorchModelHubMixin):
    pass


def hf_hub_download(*args, **kwargs):
    raise ConnectionError("hf_hub_download: a mined problem does not download from the Hugging Face Hub")


def snapshot_download(*args, **kwargs):
    raise ConnectionError("snapshot_download: a mined problem does not download from the Hugging Face Hub")


def is_offline_mode():
    return True


class ModelCard:
    def __init__(self, *args, **kwargs):
        self.data = kwargs


class ModelCardData(ModelCard):
    pass


def validate_hf_hub_args(fn):
    return fn
