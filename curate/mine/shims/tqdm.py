"""Stand-in for ``tqdm``: progress bars are not part of a problem's computation, so a bar is
its iterable, and its update/close/description methods do nothing (allennlp wraps tqdm at
import time)."""


class tqdm:
    """``tqdm(iterable, ...)``: iterates ``iterable``; no output."""

    def __init__(self, iterable=None, *args, **kwargs):
        self.iterable = iterable
        self.n = 0
        self.total = kwargs.get("total")

    def __iter__(self):
        for item in self.iterable if self.iterable is not None else ():
            self.n += 1
            yield item

    def __len__(self):
        return len(self.iterable) if self.iterable is not None else (self.total or 0)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        self.n += n

    def close(self):
        pass

    def set_description(self, *args, **kwargs):
        pass

    def set_postfix(self, *args, **kwargs):
        pass

    def refresh(self, *args, **kwargs):
        pass

    @classmethod
    def write(cls, *args, **kwargs):
        pass


tqdm_notebook = tqdm
trange = lambda *args, **kwargs: tqdm(range(*args), **kwargs)  # noqa: E731
