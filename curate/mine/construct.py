"""Constructor arguments for a mined ``nn.Module``: :class:`ConstructorSearch` guesses them
(:mod:`curate.mine.guess`), constructs, and repairs a guess from the error its constructor
or forward raised (paritybench-style), with repairs read off failed asserts and the choices
an error message lists."""

from __future__ import annotations

import ast
import contextlib
import inspect
import linecache
import re
import time
import typing
import warnings
from typing import Any

import torch
from torch import nn

from curate.mine.codegen import _literal_ok, filled_empty
from curate.mine.construct_source import (
    _assert_repairs,
    _attr_params,
    _compared_strings,
    _defines,
    _derived_config_value,
    _leaves_to_subclasses,
    _listed_choices,
    _literal_keys,
    _mapping_keys,
    _named_options,
    _passed_to_parent,
    _string_keys,
    _takes_var_kw,
)
from curate.mine.errors import _MEMORY, MINED_FILE, SynthesisError, _classify, blame
from curate.mine.guess import (
    SMALL_WIDTH,
    C,
    _CONFIG_RE,
    ConfigArg,
    Expr,
    NamespaceArg,
    alternatives,
    build,
    config_classes,
    guess,
    int_list,
    is_int,
    module_choices,
    optional_override,
    scaled_config,
    scaled_values,
)


def _init_signature(cls: type) -> list[tuple[str, inspect.Parameter]]:
    """The constructor parameters of ``cls``: those of the first ``__init__`` in its MRO that
    names any, less what an ``__init__(*args, **kwargs)`` below it passes itself (torch's
    ``GRU`` gives ``RNNBase`` its ``mode``)."""
    new = cls.__dict__.get("__new__")
    if cls.__init__ is object.__init__ and inspect.isfunction(getattr(new, "__func__", new)):
        # a ``NamedTuple`` (classy-vision's ``EfficientNetParams``): its fields are ``__new__``'s
        params = list(inspect.signature(cls.__new__).parameters.items())[1:]
        return [(n, p) for n, p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    given, keywords = 0, set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        try:
            sig = inspect.signature(init)
        except (TypeError, ValueError):
            continue
        params = [(n, p) for n, p in list(sig.parameters.items())[1:]
                  if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if params or klass is nn.Module:
            positional = [n for n, p in params if p.kind == p.POSITIONAL_OR_KEYWORD][:given]
            return [(n, p) for n, p in params if n not in keywords and n not in positional]
        has_var = any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in sig.parameters.values())
        if not has_var:
            return params
        passed, named = _passed_to_parent(init)
        given, keywords = given + passed, keywords | named
    return []


def _annotation_names(ann: Any) -> list[str]:
    """The names an annotation mentions, in order: the words of one written as a string, a
    class's name, and those of the arguments of ``Optional[...]``, ``X | None``,
    ``Annotated[X, ...]`` and other generic aliases (a ``ForwardRef``'s text)."""
    if isinstance(ann, str):
        try:  # ``"Annotated[BlockConfig, Shared]"``: the type, not its metadata
            tree = ast.parse(ann, mode="eval").body
        except SyntaxError:
            return re.findall(r"[A-Za-z_]\w*", ann)
        if isinstance(tree, ast.Subscript) and ast.unparse(tree.value).split(".")[-1] == "Annotated":
            first = tree.slice.elts[0] if isinstance(tree.slice, ast.Tuple) else tree.slice
            return _annotation_names(ast.unparse(first))
        return re.findall(r"[A-Za-z_]\w*", ann)
    if typing.get_origin(ann) is typing.Annotated:
        return _annotation_names(typing.get_args(ann)[0])
    if isinstance(ann, type):
        return [ann.__name__]
    if isinstance(ann, typing.ForwardRef):
        return re.findall(r"[A-Za-z_]\w*", ann.__forward_arg__)
    out: list[str] = []
    for arg in typing.get_args(ann):
        out += [w for w in _annotation_names(arg) if w not in out]
    return out


def _key(kwargs: dict[str, Any]) -> str:
    return repr(sorted(kwargs.items(), key=lambda kv: kv[0]))


_PLAIN_TYPES = {"int", "float", "str", "bool", "NoneType", "dict", "list", "tuple"}


#: ``set init_weights=True`` / ``pass antialias=False`` in a warning's text.
_SET_ARG = re.compile(r"\b(?:set|pass|use)\s+`?(\w+)\s*=\s*([\w.'\"-]+)")


#: A ``NotImplementedError`` about a value given, not a method left to subclasses (``"<class
#: '...LayerNorm'>" is not a valid normalization option``, ``Error: RELU activation layer not
#: implemented!``): the guess is repaired as for any other error.
_VALUE_NOT_IMPLEMENTED = re.compile(r"<class '|<function |not (?:a )?valid|unknown|invalid|not supported|unsupported|"
                                    r"\b\w+ (?:activation|normali[sz]ation|norm|type|mode) (?:layer )?not implemented",
                                    re.I)






class ConstructorSearch:
    """Successive constructor-argument guesses for ``cls`` (paritybench-style repair).

    :meth:`next` returns the next guess that constructs; :meth:`feedback` takes the error a
    constructed module raised in forward, so parameters the message names are tried next
    (``Upsample`` needs ``scale_factor``, which has a ``None`` default).
    """

    any_object = False  # whether a constructed object may be other than an nn.Module (an argument's instance)

    def __init__(self, cls: type, ns: dict[str, Any], max_tries: int = 40, fill_empty: bool = False, depth: int = 0):
        if inspect.isabstract(cls):
            raise SynthesisError("abstract", "abstract base class")
        self.cls = cls
        self._depth = depth  # nesting of searches for arguments' instances (:meth:`_instance_of`)
        self.fill_empty = fill_empty
        self.ns = ns
        self.params = _init_signature(cls)
        self.var_kw = _takes_var_kw(cls)
        self.attr_params = _attr_params(cls, {n for n, _ in self.params})
        self.choices: dict[str, list[Any]] = {}
        first: dict[str, Any] = {}
        for n, p in self.params:
            if p.default is inspect.Parameter.empty:
                self.choices[n] = guess(n, p, cls, ns)
                first[n] = self.choices[n][0]
            else:
                override = optional_override(n, p)
                if override is not inspect.Parameter.empty:
                    first[n] = override
        for n, p in self.params:
            if p.default is inspect.Parameter.empty and p.annotation is not inspect.Parameter.empty \
                    and not isinstance(first[n], ConfigArg):
                built = self._annotated_instances(p)
                if built:  # ``manifold: Manifold``: an instance of that class of the file first
                    self.choices[n] = built + [c for c in self.choices[n] if c not in built]
                    first[n] = built[0]
        self.queue = [first]
        required = {n: v for n, v in first.items() if dict(self.params)[n].default is inspect.Parameter.empty}
        if required != first:
            self.queue.append(required)  # the defaults of the optional ones, as written
        self.tried: set[str] = set()
        self.max_tries = max_tries
        self.last = ""
        self.last_line = ""  # the mined code's line that raised self.last

    def next(self, deadline: float) -> tuple[nn.Module, dict[str, Any]] | None:
        while self.queue and len(self.tried) < self.max_tries and time.monotonic() < deadline:
            attempt = self.queue.pop(0)
            key = _key(attempt)
            if key in self.tried:
                continue
            self.tried.add(key)
            try:
                torch.manual_seed(0)
                with filled_empty() if self.fill_empty else contextlib.nullcontext(), \
                        warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    module = self.cls(**{k: build(v, self.ns) for k, v in attempt.items()})
                if not isinstance(module, nn.Module) and not self.any_object:
                    raise SynthesisError("not_a_module", type(module).__name__)
                fix = self._warned(attempt, caught)
                if fix is not None:  # the warning names the argument that silences it
                    self.queue.insert(0, fix)
                    continue
                return module, attempt
            except SynthesisError:
                raise
            except NotImplementedError as exc:
                if not _VALUE_NOT_IMPLEMENTED.search(str(exc)):
                    raise SynthesisError("abstract", f"NotImplementedError: {exc}")
                self.last = f"{type(exc).__name__}: {exc}"  # a guessed value the class has no branch for
                self.last_line = blame(exc)
                self.queue[:0] = self._repairs(attempt, self.last, blame(exc))
            except (Exception, SystemExit) as exc:  # mined code may call sys.exit
                self.last = f"{type(exc).__name__}: {exc}"
                self.last_line = blame(exc)
                reason = _classify(self.last, "")
                if reason:
                    raise SynthesisError(reason, self.last)
                self.queue[:0] = self._repairs(attempt, self.last, blame(exc))
        return None

    def _warned(self, attempt: dict[str, Any], caught: list) -> dict[str, Any] | None:
        """The attempt with the argument a warning raised while building asks for
        (torchvision's GoogLeNet: "... please set init_weights=True"), or None."""
        names = {n for n, _ in self.params}
        for w in caught:
            for name, text in _SET_ARG.findall(str(w.message)):
                try:
                    value = ast.literal_eval(text.rstrip("."))  # the sentence's full stop
                except (ValueError, SyntaxError):
                    continue
                if name in names and attempt.get(name, inspect.Parameter.empty) != value:
                    return {**attempt, name: value}
        return None

    def _choices(self, name: str, value: Any) -> list[Any]:
        listed = self.choices.get(name)
        if listed is None:
            p = dict(self.params).get(name)
            listed = guess(name, p, self.cls, self.ns) if p is not None else []
        return [v for v in listed + alternatives(value, name) if v is not value and v != value][:10]

    def _blamed(self, kwargs: dict[str, Any], msg: str, line: str) -> list[str]:
        """Parameters named in the error message or on the failing line, or feeding a
        ``self.attr`` the line reads; given ones first."""
        text = f"{msg}\n{line}"
        names = [n for n, _ in self.params if re.search(rf"\b{re.escape(n)}\b", text)]
        # a layer class or function guessed, printed in the message (``"<class '...BatchNorm2d'>" is
        # not a valid normalization option``)
        names += [n for n, v in kwargs.items() if isinstance(v, Expr) and n not in names
                  and re.search(rf"<(?:class|function) '[\w.]*\b{re.escape(v.code.rsplit('.', 1)[-1])}'>", msg)]
        for attr in re.findall(r"self\.(\w+)", line):
            names += [n for n in self.attr_params.get(attr, ()) if n not in names]
        # a string guessed, quoted in the message (``'relu' is not in ['ReLU', 'ELU', ...]``, raised
        # by a helper the value was passed to, whose line names no parameter)
        names += [n for n, v in kwargs.items() if isinstance(v, str) and v and n not in names
                  and re.search(rf"(['\"]){re.escape(v)}\1", msg)]
        return [n for n in names if n in kwargs] + [n for n in names if n not in kwargs]

    def _smaller(self, kwargs: dict[str, Any]) -> dict[str, Any] | None:
        """``kwargs`` for the same model at a smaller size (:func:`scaled_values` with
        ``sizes``, width :data:`SMALL_WIDTH`), or None where nothing shrinks: the retry after
        production-size defaults (a diffusers transformer's 24 heads x 128, 19 blocks) ran out of
        memory."""
        defaults = {n: p.default for n, p in self.params if p.default is not inspect.Parameter.empty}
        plain = {k: v for k, v in {**defaults, **kwargs}.items() if isinstance(v, (int, float, list, tuple))}
        new = {**kwargs, **scaled_values(plain, SMALL_WIDTH, sizes=True)}
        for n, v in kwargs.items():
            cls = self.ns.get(v.cls_name) if type(v) is ConfigArg else None
            if isinstance(cls, type):
                new[n] = ConfigArg(v.cls_name, tuple(sorted({**v.as_dict(),
                                                            **scaled_config(cls, SMALL_WIDTH, sizes=True)}.items())))
        return new if _key(new) != _key(kwargs) else None

    def _repairs(self, kwargs: dict[str, Any], msg: str, line: str = "") -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if _MEMORY.search(msg):  # other repairs keep the size that failed
            smaller = self._smaller(kwargs)
            return [smaller] if smaller else []
        out += self._providers(kwargs, msg, line)
        m = re.search(r"'([\w.]+)' object has no attribute '(\w+)'", msg)
        if m:  # a configuration lacks an attribute the module reads: give it one
            attr = m.group(2)
            p = inspect.Parameter(attr, inspect.Parameter.KEYWORD_ONLY)
            values = [g for g in guess(attr, p, self.cls, {})[:2] if not isinstance(g, (Expr, ConfigArg))]
            if not values and re.search(r"act|activation|nonlinearity", attr.lower()):
                values = ["gelu", "relu"]  # a configuration names its activation (transformers' ACT2FN keys)
            if not values:  # only layers guessed (``config.attention_norm``): the strings the file compares it with
                values = _compared_strings(self._source(), attr)[:2] or [C]
            for n, v in kwargs.items():
                if isinstance(v, ConfigArg) and v.is_type(m.group(1)):
                    # another configuration of the file that has it (DbrxFFN takes DbrxConfig,
                    # whose ffn_config the block reads, not the DbrxFFNConfig its name suggests)
                    out += [{**kwargs, n: c} for c in self._configs_with(attr) if c.cls_name != v.cls_name][:2]
                    out += [{**kwargs, n: v.with_value(attr, g)} for g in values]
            # a plain value where the constructor reads attributes: an object the file does
            # not define (a config of another package): a namespace of what is read
            for n in self._config_params(kwargs, m.group(1), line):
                if attr in ("get", "items", "keys", "values"):  # read as a mapping: its defaults
                    out.append({**kwargs, n: {}})
                else:
                    out += [{**kwargs, n: NamespaceArg(values=((attr, g),))} for g in values[:1]]
        m = re.search(r"missing \d+ required (?:positional|keyword-only) arguments?: (.*)", msg)
        if m:
            missing = re.findall(r"'(\w+)'", m.group(1))
            extra = {}
            for n in missing:
                extra[n] = next((g for g in guess(n, inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY),
                                                  self.cls, self.ns) if not isinstance(g, (Expr, ConfigArg))), 64)
            if self.var_kw:  # a layer built from this class's **kwargs needs more of them
                out.append({**kwargs, **extra})
            # a dict parameter unpacked into a layer (``Encoder(**ddconfig)``) needs more keys
            out += [{**kwargs, n: {**v, **extra}} for n, v in kwargs.items()
                    if isinstance(v, dict) and re.search(rf"\*\*\s*{re.escape(n)}\b", line)]
            if self.var_kw:  # ``Encoder(dim=dim, **enc_kwargs)``: keys prefixed ``enc_`` of **kwargs
                out += [{**kwargs, **{p + n: v for n, v in extra.items()}} for p in _kwarg_prefixes(line, self._source())]
        if self.var_kw and re.search(r"NoneType", msg):
            # a keyword a layer built from **kwargs takes with a None default (x-transformers'
            # ``TransformerWrapper(num_tokens=None)``, given ``**enc_transformer_kwargs``): each
            # name the line passes that is no parameter here, plain and under each prefix
            given = [n for n in dict.fromkeys(re.findall(r"[(,]\s*([a-z]\w*)\s*(?=[,)])", line))
                     if n not in dict(self.params) and n != "self"]
            prefixes = [""] + _kwarg_prefixes(" ".join(re.findall(r"\*\*\s*\w+", self._source())), self._source())
            extra = {p + n: self._key_value(n) for n in given for p in prefixes if p + n not in kwargs}
            if extra:
                out.append({**kwargs, **extra})
        blamed = self._blamed(kwargs, msg, line)
        out += self._typed_repairs(kwargs, msg, line, blamed)
        choices = _listed_choices(msg)
        if choices:  # "invalid model_name 1, must be one of resnet10, resnet18, ...": take a listed one
            out += [{**kwargs, n: c} for n in blamed for c in choices[:2]]
        if "must be a mapping" in msg:  # a parameter unpacked with ** into a layer: its keyword arguments
            out += [{**kwargs, n: {}} for n in blamed if n in kwargs]
        wants_list = re.search(r"'(int|float)' object is not (subscriptable|iterable)|object of type '(int|float)' "
                               r"has no len\(\)|must be (?:a )?(?:tuple|list) of ints|not iterable", msg)
        if wants_list:  # ``config.attention_window[layer_id]``: the configuration holds one value per layer
            for n, attr in re.findall(r"\b(\w+)\.(\w+)\s*(?:\[|\)|$)", line):
                v = kwargs.get(n)
                if isinstance(v, ConfigArg):
                    old = dict(v.values).get(attr)
                    item = old if is_int(old) else C
                    out += [{**kwargs, n: v.with_value(attr, [item] * 4)}, {**kwargs, n: v.with_value(attr, [1] * 4)}]
        out += [r for n in blamed for r in _called_layers(kwargs, n, msg, line)]
        for n in blamed:
            p = dict(self.params)[n]
            if n not in kwargs:
                out += [{**kwargs, n: g} for g in guess(n, p, self.cls, self.ns)[:3]]
            elif wants_list and is_int(kwargs[n]):
                v = kwargs[n]
                out += [{**kwargs, n: alt} for alt in ([v, v], [v, 2 * v, 4 * v, 8 * v], (v, v), [2, 2, 2, 2])]
            elif wants_list and isinstance(kwargs[n], float):  # one rate per layer (``drop_path[i]``)
                out.append({**kwargs, n: [kwargs[n]] * 4})
        if msg.startswith("AssertionError"):
            out += _assert_repairs(kwargs, line, [n for n, _ in self.params], self.ns)
            # ``assert isinstance(attn_layers, AttentionLayers)``: an instance of that class of the file
            for n, cls_name in re.findall(r"\bisinstance\(\s*(\w+)\s*,\s*(\w+)\s*\)", line):
                if n in kwargs and not isinstance(kwargs[n], ConfigArg):
                    built = self._instance_of(cls_name)
                    if built is not None and built != kwargs[n]:
                        out.append({**kwargs, n: built})
        if "divisible" in msg or "multiple" in msg or msg.startswith("AssertionError") and "%" in line:
            out.append({k: (v if not isinstance(v, int) or isinstance(v, bool) else (C if v != C else 8))
                        for k, v in kwargs.items()})
        names = list(kwargs)
        for n in [n for n in blamed if n in kwargs] + [n for n in names if n not in blamed]:
            for alt in self._choices(n, kwargs[n]):
                out.append({**kwargs, n: alt})
        return out

    def _instance_of(self, cls_name: str, any_object: bool = False) -> Expr | None:
        """Source building an instance of class ``cls_name`` of the problem file, its arguments
        found by a short search of their own (a class taking another class's instance, as
        ``TransformerWrapper`` takes ``AttentionLayers``); None where none builds. Instances
        nest at most two levels."""
        target = self.ns.get(cls_name)
        if not isinstance(target, type) or target is self.cls or self._depth >= 2:
            return None
        try:
            torch.manual_seed(0)
            target()
            return Expr(f"{cls_name}()")
        except Exception:  # noqa: BLE001 - it needs arguments: search them
            pass
        if not issubclass(target, nn.Module) and not any_object:
            return None
        try:
            inner = ConstructorSearch(target, self.ns, max_tries=12, fill_empty=self.fill_empty, depth=self._depth + 1)
            inner.any_object = any_object
            got = inner.next(time.monotonic() + 3.0)
        except SynthesisError:
            return None
        if got is None:
            return None
        parts = []
        for k, v in got[1].items():
            if isinstance(v, Expr):
                parts.append(f"{k}={v.code}")
            elif isinstance(v, ConfigArg) or not _literal_ok(v):
                return None
            else:
                parts.append(f"{k}={v!r}")
        return Expr(f"{cls_name}({', '.join(parts)})")

    def _providers(self, kwargs: dict[str, Any], msg: str, line: str) -> list[dict[str, Any]]:
        """Guesses giving a parameter read for an attribute its guess lacks (``'int' object has
        no attribute 'reset'`` on ``self.projector.reset()``, ``type object 'GELU' has no
        attribute 'max_seq_len'`` on ``net.max_seq_len``) an instance of a class of the problem
        file that defines it (a method, ``self.<attr> =`` in its ``__init__``, a class
        attribute), built by a short search of its own; at most two classes."""
        m = re.search(r"(?:type object '[\w.]+'|'[\w.]+' object) has no attribute '(\w+)'", msg)
        if not m or m.group(1).startswith("__"):
            return []
        attr = m.group(1)
        read = set(re.findall(rf"\b(\w+)\s*\.\s*{attr}\b", line))
        names = [n for n in read if n in kwargs]
        names += [n for a in read for n in self.attr_params.get(a, ()) if n in kwargs and n not in names]
        names = [n for n in names if not isinstance(kwargs[n], ConfigArg)]
        if not names:
            return []
        # implementations: not a base leaving methods (or a module's forward) to subclasses
        classes = [name for name, c in self.ns.items() if isinstance(c, type) and c is not self.cls
                   and not issubclass(c, BaseException) and _defines(c, attr) and not _leaves_to_subclasses(c)
                   and not (issubclass(c, nn.Module) and c.forward is nn.Module.forward)][:2]
        out: list[dict[str, Any]] = []
        for name in classes:
            built = self._instance_of(name, any_object=True)
            if built is not None and built != kwargs[names[0]]:
                out.append({**kwargs, names[0]: built})
            if len(out) >= 2:
                break
        return out

    def _annotated_instances(self, p: inspect.Parameter) -> list[Expr]:
        """Instances of the classes of the problem file that parameter ``p`` is annotated with
        (``manifold: Manifold``, ``scheduler: "NoiseScheduler"``), each built by a short search
        of its own; for a class whose methods raise ``NotImplementedError`` (a base left to
        subclasses), its subclasses in the file first. At most two."""
        words = _annotation_names(p.annotation)
        out: list[Expr] = []
        for word in words:
            target = self.ns.get(word)
            if not isinstance(target, type) or target.__module__.split(".")[0] in ("torch", "typing", "builtins") \
                    or target is self.cls or word in {c.__name__ for c in config_classes(self.ns)}:
                continue
            # the most complete implementations first: those defining the most methods
            subs = sorted((name for name, c in self.ns.items() if isinstance(c, type) and c is not target
                           and issubclass(c, target) and not inspect.isabstract(c)),
                          key=lambda name: -sum(inspect.isfunction(f) for f in vars(self.ns[name]).values()))
            names = subs + [word] if _leaves_to_subclasses(target) else [word] + subs
            for name in names[:3]:
                built = self._instance_of(name, any_object=True)
                if built is not None and built not in out:
                    out.append(built)
                if len(out) >= 2:
                    return out
        return out

    def _source(self) -> str:
        """The mined file's text (``exec_source`` puts it in ``linecache``), for the keys and
        names the constructor's code reads."""
        if not hasattr(self, "_text"):
            files = [k.__dict__["__init__"].__code__.co_filename for k in self.cls.__mro__
                     if hasattr(k.__dict__.get("__init__"), "__code__")]
            mined = [f for f in files if f.startswith(MINED_FILE[:-1])]
            self._text = "".join(linecache.getlines(mined[0])) if mined else ""
        return self._text

    def _typed_repairs(self, kwargs: dict[str, Any], msg: str, line: str, blamed: list[str]) -> list[dict[str, Any]]:
        """Guesses of the type the failing line uses a parameter as, when the guess had another:

        - indexed by string keys (``config['thr']``: ``'int' object is not subscriptable``, ``list
          indices must be integers or slices, not str``): a dict of every key the file reads that way;
          a dict missing one (``KeyError: 'thr'``) gains it;
        - unpacked (``h, w = image_size``: ``cannot unpack non-iterable int object``, or ``expected 4,
          got 1``): a tuple of as many values; a list whose items are unpacked, a list of such tuples;
        - items iterated or indexed (``for a, b in pairs``: ``'int' object is not iterable`` with a list
          of ints): a list of pairs;
        - a key of a dict the file defines (``NORMS[norm_type]``: ``KeyError: 32``): its keys;
        - a count guessed as a layer (``range(num_res_blocks)``: ``'Conv2d' object cannot be
          interpreted as an integer``, ``object of type 'Linear' has no len()``): numbers.
        """
        out: list[dict[str, Any]] = []
        params = dict(self.params)
        # string keys
        if re.search(r"not subscriptable|indices must be integers|^KeyError: '|string indices", msg):
            for n in re.findall(r"\b(\w+)\s*\[\s*['\"]", line):
                if n not in params or isinstance(kwargs.get(n), (Expr, ConfigArg)):
                    continue
                keys = _string_keys(self._source(), n)
                old = kwargs.get(n)
                if isinstance(old, dict):
                    m = re.match(r"KeyError: '(\w+)'", msg)
                    keys = [k for k in keys + ([m.group(1)] if m else []) if k not in old]
                    if keys:
                        out.append({**kwargs, n: {**old, **{k: self._key_value(k) for k in keys}}})
                elif keys:
                    out.append({**kwargs, n: {k: self._key_value(k) for k in keys}})
        # unpacking
        m = re.search(r"cannot unpack non-iterable (int|float) object|values to unpack \(expected (\d+)", msg)
        if m:
            t = re.match(r"\s*(?:for\s+)?\(?\s*([\w.]+(?:\s*,\s*[\w.]+)+)\s*,?\s*\)?\s*(?:=|in\b)", line)
            size = int(m.group(2)) if m.group(2) else len(t.group(1).split(",")) if t else 2
            direct = [n for n in blamed if n in kwargs and (re.search(rf"(=|\bin)\s*(self\.)?{n}\b", line))]
            for n in direct or blamed:
                v = kwargs.get(n)
                if is_int(v) or isinstance(v, float):
                    out += [{**kwargs, n: (v,) * size}]
                elif isinstance(v, (list, tuple)) and v and int_list(v):
                    if m.group(2) and (direct or not m.group(1)):
                        out += [{**kwargs, n: [v[0]] * size}, {**kwargs, n: [v[0] * 2 ** i for i in range(size)]}]
                    else:
                        out.append({**kwargs, n: [(x,) * size for x in v]})
            if m.group(1) and not direct:  # the items of a list parameter are unpacked elsewhere
                out += [{**kwargs, n: [(x,) * size for x in v]} for n, v in kwargs.items()
                        if n not in blamed and isinstance(v, (list, tuple)) and v and int_list(v)]
        # items iterated: the blamed list, or else a list the file iterates (``for stage in channels``)
        if re.search(r"'(int|float)' object is not (iterable|subscriptable)", msg) and not any(
                is_int(kwargs.get(n)) or isinstance(kwargs.get(n), float) for n in blamed):  # else that one is
            flat = {n: v for n, v in kwargs.items()
                    if isinstance(v, (list, tuple)) and v and int_list(v)}
            names = [n for n in blamed if n in flat] or [
                n for n in flat if re.search(rf"\bin\s+(?:enumerate\(|zip\()?(?:self\.)?{n}\b", self._source())]
            for n in names:
                if len(flat[n]) < 4:  # whole networks are built for four stages (224 pixels -> 7x7)
                    x = flat[n][0]
                    out.append({**kwargs, n: [[x // 2] * 2, [x] * 2, [2 * x] * 2, [4 * x] * 2]})
                out.append({**kwargs, n: [[x, x] for x in flat[n]]})
        # a name where a layer class or function was guessed (``activation = activation.lower()``:
        # ``type object 'ReLU' has no attribute 'lower'``): the strings the file compares it with
        m = re.search(r"(?:type object '\w+'|'(?!str')\w+' object) has no attribute '(lower|upper|casefold|startswith|"
                      r"endswith|split|strip|replace|format)'", msg)
        if m:
            for n in blamed:
                if n in params and not isinstance(kwargs.get(n), str):
                    out += [{**kwargs, n: v} for v in _named_options(self._source(), n)[:3]]
        # a value the file compares with strings, guessed as something else (``if norm_type ==
        # 'batch': ... else: raise NotImplementedError``): those strings
        if not m:
            for n in blamed:
                v = kwargs.get(n)
                if n in params and v is not None and not isinstance(v, (str, bool)):
                    out += [{**kwargs, n: s} for s in _named_options(self._source(), n, fallback=False)[:2]]
        # a key a **kwargs constructor reads (``kwargs["levels"]``, ``d.pop(key)``)
        m = re.match(r"KeyError: '(\w+)'$", msg)
        if m and self.var_kw and m.group(1) not in kwargs and m.group(1) not in params:
            out.append({**kwargs, m.group(1): self._key_value(m.group(1))})
        # keys of a dict of the file, or of one written on the line (``{1: nn.Conv1d, 2: nn.Conv2d}[dim]``)
        if msg.startswith("KeyError") or "not iterable" in msg:
            for d, n, key in re.findall(r"([\w.]+|\{[^{}]*\})\s*\[\s*(\w+)\s*(?:\[\s*['\"](\w+)['\"]\s*\])?\]", line):
                keys = _mapping_keys(self.ns, d) if not d.startswith("{") else _literal_keys(d)
                if not keys:
                    continue
                if key and isinstance(kwargs.get(n), dict):  # ``table[config["kind"]]``
                    out += [{**kwargs, n: {**kwargs[n], key: k}} for k in keys[:2]]
                elif n in params:
                    out += [{**kwargs, n: k} for k in keys[:3] if k != kwargs.get(n)]
                else:  # ``[TABLE[e] for e in symbols]``: the parameter lists keys
                    for p in re.findall(rf"\bfor\s+{n}\s+in\s+(\w+)", line):
                        if p in params:
                            out.append({**kwargs, p: keys[:2]})
        # a list too short for the index read (``dims[2]`` of ``[64, 64]``), itself or a dict's value
        if msg.startswith("IndexError") and "out of range" in msg:
            for name, i in re.findall(r"\b(\w+)\s*\[\s*(-?\d+)\s*\]", line):
                size = max(int(i) + 1, -int(i), 4)
                for n, key in [(name, None)] + re.findall(
                        rf"\b{name}\s*=\s*(\w+)\s*\[\s*['\"](\w+)['\"]\s*\]", self._source()):
                    v = kwargs.get(n)
                    if key is not None:
                        if not isinstance(v, dict):
                            continue
                        v = v.get(key)
                    if isinstance(v, (list, tuple)) and 0 < len(v) < size:
                        for longer in ([v[0]] * size, [v[0] * 2 ** j for j in range(size)] if is_int(v[0]) else None):
                            if longer is not None:
                                out.append({**kwargs, n: longer if key is None else {**kwargs[n], key: longer}})
        # a configuration attribute left None that the line computes with (``head_dim ** -0.5``)
        if re.search(r"'NoneType'|NoneType", msg) and msg.startswith("TypeError"):
            for n, v in kwargs.items():
                if not isinstance(v, ConfigArg) or isinstance(v, NamespaceArg):
                    continue
                attrs = re.findall(rf"\b{n}\.(\w+)", line)
                for a in re.findall(r"self\.(\w+)", line):  # ``self.x = config.x`` earlier
                    attrs += re.findall(rf"self\.{a}\s*=\s*{n}\.(\w+)\s*$", self._source(), re.M) + [a]
                fixed = {}
                for a in dict.fromkeys(attrs):
                    if a in v.as_dict() and v.as_dict()[a] is None or a not in v.as_dict() and self._none_attr(v, a):
                        fixed[a] = _derived_config_value(a, build(v, self.ns))
                        if fixed[a] is None:
                            fixed[a] = self._key_value(a)
                if fixed:
                    new = v
                    for a, g in fixed.items():
                        new = new.with_value(a, g)
                    out.append({**kwargs, n: new})
        # a list where the code computes with a number (``model_dims // num_heads``): a namespace's
        # attribute guessed from a plural-looking name
        if re.search(r"unsupported operand type\(s\) for .*'(list|tuple)'", msg):
            for n, v in kwargs.items():
                if isinstance(v, NamespaceArg):
                    lists = {a: x[0] for a, x in v.values if isinstance(x, (list, tuple)) and x and is_int(x[0])}
                    if lists:
                        out.append({**kwargs, n: NamespaceArg(values=tuple({**v.as_dict(), **lists}.items()))})
        # a layer class where an instance is needed (``nn.ModuleList([..., activation])``), or
        # where a name is (``ACT2FN[hidden_act]``: ``KeyError: <class '...GELU'>``)
        m = re.search(r"([\w.]+) is not a Module subclass|^KeyError: <class '([\w.]+)'>", msg)
        if m:
            cls_name = (m.group(1) or m.group(2)).rsplit(".", 1)[-1]
            for n, v in kwargs.items():
                if isinstance(v, Expr) and v.code.rsplit(".", 1)[-1] == cls_name:
                    out.append({**kwargs, n: Expr(v.code + "()") if m.group(1) else cls_name.lower()})
                elif isinstance(v, Expr) and v.code.startswith("torch.nn.functional.") and m.group(1):
                    out.append({**kwargs, n: Expr("torch.nn.GELU()")})  # a function where a layer goes
        # one layer where a list of layers goes (``self.transforms.extend(transforms)``)
        m = re.search(r"should be called with an iterable, but got (\w+)|'(\w+)' object is not iterable", msg)
        if m:
            kind = m.group(1) or m.group(2)
            for n, v in kwargs.items():
                if isinstance(v, Expr) and re.search(rf"\b{re.escape(kind)}\b", v.code) and not v.code.startswith("["):
                    layer = v.code if v.code.endswith(")") else v.code + "()"
                    out.append({**kwargs, n: Expr(f"[{layer}, {layer}]")})
        # plain values where layers go (``nn.ModuleList(experts)``, ``copy.deepcopy(module)``)
        if re.match(r"TypeError: (int|float|bool|str|tuple|list) is not a Module subclass", msg):
            layer = module_choices("")[0].code
            for n in blamed:
                v = kwargs.get(n)
                if n in kwargs and not isinstance(v, (Expr, ConfigArg)):
                    out.append({**kwargs, n: Expr(f"[{layer}, {layer}]" if isinstance(v, (list, tuple)) else layer)})
        # an index left None (transformers' ``config.layer_types[layer_idx]``, ``layer_idx=None``)
        if re.search(r"indices must be integers or slices, not NoneType", msg):
            for n in dict.fromkeys(re.findall(r"\[\s*(?:self\.)?(\w+)\s*\]", line)):
                if n in params and kwargs.get(n) is None:
                    out.append({**kwargs, n: 0})
        # a tensor argument read as one (``mean.shape``, ``pos_enc.float()``, ``adjacency.shape``)
        m = re.search(r"'(?:int|float|bool|NoneType)' object has no attribute '(to|shape|size|reshape|view|float|dim|"
                      r"ndim|ndimension|device|dtype|numel|clone|detach|unsqueeze|type|double|long|new_zeros|new_ones|"
                      r"new_tensor|argsort|flatten|cpu)'", msg)
        if m:
            for n in dict.fromkeys(re.findall(rf"(?<![\w.])(?:self\.)?(\w+)\s*\.\s*{m.group(1)}\b", line)):
                if n in params and not isinstance(kwargs.get(n), (Expr, ConfigArg)):
                    # a permutation of the features (normflows' ``_Permutation``), indices, else values
                    tensors = [f"torch.arange({C})"] if "perm" in n else ["torch.arange(4)"] if re.search(
                        r"ind(ex|ices)|idx|ids$", n) else [
                        f"torch.randn({C})", f"torch.randn({C}, {C})", f"torch.randn(1, {C}, {C})"]
                    out += [{**kwargs, n: Expr(t)} for t in tensors]
        # a count guessed as a layer
        m = re.search(r"'(\w+)' object cannot be interpreted as an integer|object of type '(\w+)' has no len|"
                      r"'(\w+)' object is not (?:iterable|subscriptable)", msg)
        if m and (m.group(1) or m.group(2) or m.group(3)) not in _PLAIN_TYPES:
            for n in blamed:
                if isinstance(kwargs.get(n), Expr):
                    out += [{**kwargs, n: v} for v in ([2, 1] if m.group(1) else [[2, 2], [C, C]])]
        return out

    def _none_attr(self, config: ConfigArg, attr: str) -> bool:
        """Whether the configuration ``config`` builds has attribute ``attr`` set to None."""
        try:
            return getattr(build(config, self.ns), attr, 0) is None
        except Exception:  # a configuration that does not build
            return False

    def _key_value(self, key: str) -> Any:
        """A value for a configuration dict's ``key``, guessed from its name like a parameter."""
        p = inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY)
        return next((g for g in guess(key, p, self.cls, {}) if not isinstance(g, (Expr, ConfigArg))), C)

    def _configs_with(self, attr: str) -> list[ConfigArg]:
        """Configuration classes of the file whose default instance has attribute ``attr``,
        as scaled guesses."""
        out = []
        for c in config_classes(self.ns):
            try:
                if not hasattr(c(), attr):
                    continue
            except Exception:  # a configuration whose defaults do not build
                continue
            out.append(ConfigArg(c.__name__, tuple(sorted(scaled_config(c).items()))))
        return out

    def _config_params(self, kwargs: dict[str, Any], type_name: str, line: str) -> list[str]:
        """Parameters holding a plain value of type ``type_name`` that the failing line reads
        attributes of (``config.hidden_size``), or named like a configuration."""
        type_name = type_name.rsplit(".", 1)[-1]
        if type_name not in _PLAIN_TYPES:
            return []
        plain = [n for n, v in kwargs.items()
                 if type(v).__name__ == type_name and not isinstance(v, (ConfigArg, Expr))]
        read = [n for n in plain if re.search(rf"\b{re.escape(n)}\.\w", line)]
        return read or [n for n in plain if re.search(_CONFIG_RE, n.lower())]

    def feedback(self, kwargs: dict[str, Any], msg: str, line: str = "") -> int:
        """Queue guesses suggested by a forward error; return how many were queued."""
        new = []
        if _MEMORY.search(msg):
            smaller = self._smaller(kwargs)
            if smaller:
                self.queue.insert(0, smaller)
                return 1
        m = re.search(r"'([\w.]+)' object has no attribute '(\w+)'", msg)
        if m and (any(isinstance(v, ConfigArg) and v.is_type(m.group(1)) for v in kwargs.values())
                  or self._config_params(kwargs, m.group(1), line)):
            new += self._repairs(kwargs, msg, line)[:4]
        new += self._providers(kwargs, msg, line)
        stage = re.fullmatch(r"[a-z_]+?(\d)", m.group(2)) if m and m.group(1) == self.cls.__name__ else None
        if stage:  # forward reads ``self.layer4``: one entry per stage in the per-stage lists
            n = max(int(stage.group(1)), 2)
            # counts of blocks per stage stay small (ResNet's ``layers``); widths repeat
            longer = {k: type(v)([2] * n if re.search(r"depth|layers$|blocks$", k) else
                                 list(v) + [v[-1]] * (n - len(v))) for k, v in kwargs.items()
                      if isinstance(v, (list, tuple)) and 0 < len(v) < n and int_list(v)}
            if longer:
                new.append({**kwargs, **longer})
        m = re.search(r"Dimension out of range \(expected to be in range of \[-?\d+, -?\d+\], but got (-?\d+)\)", msg)
        if m:  # an axis guessed as a width (``Unflatten(dim=64, ...)``): the axes every input has
            new += [{**kwargs, n: axis} for n, v in kwargs.items() for axis in (1, -1)
                    if is_int(v) and v == int(m.group(1)) and re.search(r"(^|_)(dim|axis)$", n)]
        for n in self._blamed(kwargs, msg, line):
            p = dict(self.params)[n]
            new += _called_layers(kwargs, n, msg, line)
            if n not in kwargs:
                new += [{**kwargs, n: g} for g in guess(n, p, self.cls, self.ns)[:2]]
            else:
                new += [{**kwargs, n: alt} for alt in self._choices(n, kwargs[n])[:4]]
        self.queue[:0] = new
        return len(new)


def _kwarg_prefixes(line: str, source: str) -> list[str]:
    """Prefixes of a ``**kwargs`` constructor's keywords that the failing line passes on to a
    layer: ``Encoder(dim=dim, **enc_kwargs)`` where the file splits the keywords by the
    prefix ``"enc_"`` (lucidrains' ``group_by_key_prefix_and_trim('enc_', kwargs)``, which
    memformer and performer-pytorch's encoder-decoders call). Only prefixes the file writes
    as a string."""
    return [p for p in dict.fromkeys(m + "_" for m in re.findall(r"\*\*\s*([a-z]\w*?)_kwargs\b", line))
            if re.search(rf"""['"]{re.escape(p)}['"]""", source)]


_LAYER_CALL_MISMATCH = re.compile(r"\b(Linear|Conv[123]d|Identity)\.forward\(\) (got an unexpected keyword "
                                  r"argument|takes \d+ positional arguments? but \d+ were given)")
_NOT_CALLABLE = re.compile(r"'(int|float|str|bool|NoneType|tuple|list)' object is not callable")


def _called_layers(kwargs: dict[str, Any], name: str, msg: str, line: str = "") -> list[dict[str, Any]]:
    """Guesses giving parameter ``name`` a layer when the module called the plain value it
    holds (``self.embedding = embedding``, then ``self.embedding(x)``: ``'int' object is not
    callable``); the layer kind its name says first. A guessed layer called with inputs or
    keywords no layer takes (a diffusion wrapper's ``self.net(x, sigmas, **kwargs)``, a loss's
    ``self.loss(input, target)``) becomes :data:`PASSTHROUGH`."""
    if _LAYER_CALL_MISMATCH.search(msg) and isinstance(kwargs.get(name), Expr) and kwargs[name] != PASSTHROUGH:
        return [{**kwargs, name: PASSTHROUGH}]
    if not _NOT_CALLABLE.search(msg) or isinstance(kwargs.get(name), (Expr, ConfigArg)):
        return []
    layers = module_choices(name)[:3]
    # called with several arguments (``self.loss(input, target)``): no layer takes them
    args = line.split("(", 1)[1] if "(" in line else ")"
    several = "," in args or not args.strip()  # a call split over lines has several
    return [{**kwargs, name: m} for m in ([PASSTHROUGH] + layers if several else layers + [PASSTHROUGH])]


#: A callable for a parameter called with several inputs or keywords no layer takes
#: (diffusers' ``processor(attn, hidden_states=...)``, ``loss(input, target)``, a wrapped
#: ``inner_model(x, sigma)``): it returns its first tensor argument.
PASSTHROUGH = Expr("(lambda *args, **kwargs: next(a for a in (*args, *kwargs.values()) "
                   "if isinstance(a, torch.Tensor)))")
