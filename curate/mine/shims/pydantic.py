"""Stand-in for the part of ``pydantic`` model libraries use: configuration models
(``BaseModel`` subclasses whose annotated class attributes are fields, ``Field`` defaults and
factories, ``ConfigDict``/``class Config`` settings, field and model validators), a type
adapter for import strings (braindecode resolves ``"torch.nn.ELU"`` in saved configurations
with ``TypeAdapter(ImportString)``) and the validation error.

A model's constructor takes its fields by keyword, as pydantic's does, and says so in its
signature (``inspect.signature(Model.__init__)``: one keyword-only parameter a field, required
where the field has no default), so a module taking ``config: SomeConfig`` gets one built like
any other argument. Values are checked and converted only as far as configurations need: a
missing required field or an extra one a model forbids raises :class:`ValidationError`; a dict
given for a model-typed field (or a list of dicts for a list of models) becomes that model; an
int given for a ``float`` field becomes a float; a list for a ``tuple`` field a tuple; a value
of an ``Enum`` field that enum's member. Other values pass through as given.

Only modules a problem may import (the standard library, torch, numpy) are resolved by the
type adapter.
"""

import copy
import enum
import importlib
import inspect
import sys
import typing


class ValidationError(ValueError):
    """A value a model or the adapter cannot validate."""


class _Undefined:
    def __repr__(self):
        return "PydanticUndefined"


PydanticUndefined = _Undefined()


class FieldInfo:
    """A field's default (or default factory), alias and annotation; other keywords
    (``ge``, ``description``, ...) are kept but not enforced."""

    def __init__(self, default=PydanticUndefined, *, default_factory=None, alias=None, **kwargs):
        self.default = PydanticUndefined if default is Ellipsis else default
        self.default_factory = default_factory
        self.alias = alias
        self.annotation = None
        self.namespace = {}
        self.metadata = kwargs

    def is_required(self):
        return self.default is PydanticUndefined and self.default_factory is None

    def get_default(self, call_default_factory=False):
        if self.default_factory is not None:
            return self.default_factory() if call_default_factory else PydanticUndefined
        return copy.deepcopy(self.default)


def Field(default=PydanticUndefined, *, default_factory=None, alias=None, **kwargs):  # noqa: N802 - pydantic's name
    """A field's settings: ``x: int = Field(3, ge=1)``, ``Field(default_factory=list)``."""
    return FieldInfo(default, default_factory=default_factory, alias=alias, **kwargs)


def PrivateAttr(default=None, *, default_factory=None):  # noqa: N802 - pydantic's name
    """A private attribute's default (``_cache: dict = PrivateAttr(default_factory=dict)``)."""
    return default_factory() if default_factory is not None else default


def ConfigDict(**kwargs):  # noqa: N802 - pydantic's name
    """A model's settings (``extra="forbid"``, ``frozen=True``) as a dict."""
    return dict(kwargs)


def _marked(kind, mode, fields=(), **extra):
    def mark(fn):
        target = getattr(fn, "__func__", fn)  # under @classmethod or not
        target.__pydantic_validator__ = (kind, mode, fields, extra)
        return fn
    return mark


def model_validator(*, mode="after"):
    """A model-level validator: ``mode="before"`` gets the input mapping (a classmethod),
    ``"after"`` the built model."""
    return _marked("model", mode)


def field_validator(*fields, mode="after", **kwargs):
    """A validator of the named fields' values; it returns the value to keep."""
    return _marked("field", mode, fields)


def validator(*fields, pre=False, **kwargs):
    """pydantic 1's field validator: ``(cls, value[, values])``."""
    return _marked("field_v1", "before" if pre else "after", fields)


def root_validator(*args, pre=False, **kwargs):
    """pydantic 1's model validator: ``(cls, values)`` returning the values."""
    if args and callable(args[0]):
        return _marked("root", "after")(args[0])
    return _marked("root", "before" if pre else "after")


def _passthrough(*args, **kwargs):
    """A decorator that changes nothing here (serializers, computed fields)."""
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda fn: fn


computed_field = field_serializer = model_serializer = _passthrough


class _Info:
    """What a validator's ``info`` argument offers: the fields validated so far."""

    def __init__(self, data, field_name=None):
        self.data = data
        self.field_name = field_name


def _positional_count(fn):
    try:
        return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return 2


def _resolve(annotation, ns):
    if isinstance(annotation, str):
        try:
            return eval(annotation, dict(ns))  # noqa: S307 - the model's own annotation
        except Exception:  # an annotation naming what this problem lacks
            return None
    return annotation


def _convert(value, annotation):
    """``value`` converted to ``annotation`` where pydantic would do so for a configuration."""
    if annotation is None or value is None:
        return value
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel) and isinstance(value, dict):
            return annotation(**value)
        if annotation is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if annotation is tuple and isinstance(value, list):
            return tuple(value)
        if issubclass(annotation, enum.Enum) and not isinstance(value, annotation):
            try:
                return annotation(value)
            except ValueError:
                return value
        return value
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (list, tuple, set) and isinstance(value, (list, tuple, set)):
        item = args[0] if args and (origin is not tuple or len(args) == 2 and args[1] is Ellipsis) else None
        items = [_convert(v, item) for v in value] if item is not None else list(value)
        return origin(items)
    if args:  # Optional[...], Union[...]: the first model among the members takes a dict
        if isinstance(value, dict):
            model = next((a for a in args if isinstance(a, type) and issubclass(a, BaseModel)), None)
            return model(**value) if model is not None else value
        if isinstance(value, list):
            listed = next((a for a in args if typing.get_origin(a) is list), None)
            return _convert(value, listed) if listed is not None else value
    return value


def _dump(value):
    if isinstance(value, BaseModel):
        return value.model_dump()
    if isinstance(value, (list, tuple)):
        return type(value)(_dump(v) for v in value)
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


class BaseModel:
    """A configuration model: annotated class attributes are its fields (see the module)."""

    model_config = {}
    model_fields = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__()
        # the namespace the class statement runs in, for annotations written as strings
        cls.__pydantic_ns__ = sys._getframe(1).f_globals
        config = dict(getattr(cls, "model_config", {}) or {})
        legacy = cls.__dict__.get("Config")
        if isinstance(legacy, type):  # pydantic 1's ``class Config: extra = "allow"``
            config.update({k: v for k, v in vars(legacy).items() if not k.startswith("_")})
        config.update(kwargs)  # ``class Model(BaseModel, extra="forbid")``
        cls.model_config = config
        fields, validators = {}, []
        for klass in reversed(cls.__mro__):
            if klass is object or klass is BaseModel:
                continue
            for name, annotation in klass.__dict__.get("__annotations__", {}).items():
                if name.startswith("_") or "ClassVar" in str(annotation):
                    continue
                value = klass.__dict__.get(name, PydanticUndefined)
                info = copy.copy(value) if isinstance(value, FieldInfo) else FieldInfo(value)
                info.annotation = annotation  # resolved when first needed: it may name a later class
                info.namespace = getattr(klass, "__pydantic_ns__", {})
                fields[name] = info
            for name, value in vars(klass).items():
                marker = getattr(getattr(value, "__func__", value), "__pydantic_validator__", None)
                if marker is not None:
                    validators = [v for v in validators if v[0] != name] + [(name, *marker)]
        cls.model_fields = fields
        cls.__pydantic_validators__ = validators
        own = cls.__dict__.get("__init__")
        if own is None or getattr(own, "__pydantic_generated__", False):
            cls.__init__ = _generated_init(cls, fields)

    def __init__(self, /, **data):
        cls = type(self)
        for name, kind, mode, _, _ in cls.__pydantic_validators__:
            if mode == "before" and kind in ("model", "root"):
                data = _call(getattr(cls, name), cls, data)
        data = dict(data)
        values = {}
        for name, info in cls.model_fields.items():
            key = info.alias if info.alias is not None and info.alias in data else name
            if key in data:  # validators see given values, not defaults (pydantic's validate_default=False)
                value = _convert(data.pop(key), _resolve(info.annotation, info.namespace))
                values[name] = self._validate_field(name, value, values)
            elif info.is_required():
                raise ValidationError(f"{cls.__name__}: field required: {name}")
            else:
                values[name] = info.get_default(call_default_factory=True)
        extra = cls.model_config.get("extra", "ignore")
        if data and extra == "forbid":
            raise ValidationError(f"{cls.__name__}: extra inputs are not permitted: {sorted(data)}")
        if data and extra == "allow":
            values.update(data)
        for name, kind, mode, _, _ in cls.__pydantic_validators__:
            if mode == "after" and kind == "root":
                values = getattr(cls, name)(values)
        for name, value in values.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "__pydantic_fields_set__", set(values))
        self.model_post_init(None)
        for name, kind, mode, _, _ in cls.__pydantic_validators__:
            if mode == "after" and kind == "model":
                method = getattr(self, name)
                method(None) if _positional_count(method) >= 1 else method()

    def _validate_field(self, field, value, values):
        cls = type(self)
        for name, kind, mode, fields, _ in cls.__pydantic_validators__:
            if kind not in ("field", "field_v1") or (field not in fields and "*" not in fields):
                continue
            fn = getattr(cls, name)
            raw = getattr(fn, "__func__", fn)
            extra = [] if _positional_count(raw) < 3 else [values if kind == "field_v1" else _Info(values, field)]
            value = raw(cls, value, *extra)
        return value

    def model_post_init(self, context):
        """Called after the fields are set (a subclass's hook)."""

    @classmethod
    def model_validate(cls, obj, *args, **kwargs):
        return obj if isinstance(obj, cls) else cls(**dict(obj))

    parse_obj = model_validate

    def model_dump(self, *args, exclude=None, **kwargs):
        exclude = set(exclude or ())
        return {k: _dump(v) for k, v in self.__iter__() if k not in exclude}

    dict = model_dump

    def model_copy(self, *, update=None, deep=False):
        new = copy.deepcopy(self) if deep else copy.copy(self)
        for k, v in (update or {}).items():
            object.__setattr__(new, k, v)
        return new

    copy = model_copy

    @property
    def model_fields_set(self):
        return set(getattr(self, "__pydantic_fields_set__", ()))

    def __iter__(self):
        names = list(type(self).model_fields) + [k for k in self.__dict__ if k not in type(self).model_fields]
        return iter([(k, self.__dict__[k]) for k in names if k in self.__dict__ and not k.startswith("_")])

    def __eq__(self, other):
        return type(self) is type(other) and self.model_dump() == other.model_dump()

    __hash__ = None

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.__iter__())})"


def _call(fn, cls, data):
    raw = getattr(fn, "__func__", fn)
    return raw(cls, data) if _positional_count(raw) >= 2 else raw(data)


def _generated_init(cls, fields):
    """An ``__init__`` taking the fields by keyword, with the signature saying so."""
    def __init__(self, /, **data):
        BaseModel.__init__(self, **data)
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)]
    for name, info in fields.items():
        if info.is_required():
            default = inspect.Parameter.empty
        else:
            try:
                default = info.get_default(call_default_factory=True)
            except Exception:  # a factory that needs what this problem lacks
                default = None
        params.append(inspect.Parameter(info.alias or name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=info.annotation if info.annotation is not None
                                        else inspect.Parameter.empty))
    __init__.__signature__ = inspect.Signature(params)
    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    __init__.__pydantic_generated__ = True
    return __init__


class ImportString:
    """Marker type: a dotted path to an importable object."""


def _import_string(path):
    module, _, attr = str(path).rpartition(".")
    if module.split(".")[0] not in ("torch", "numpy", "math", "collections", "functools", "operator"):
        raise ValidationError(f"cannot import {path!r} in a problem")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValidationError(f"cannot import {path!r}: {exc}") from None


class TypeAdapter:
    """``TypeAdapter(ImportString).validate_python("torch.nn.ELU")`` -> ``torch.nn.ELU``;
    other types pass values through."""

    def __init__(self, type_, *args, **kwargs):
        self.type = type_

    def validate_python(self, value, *args, **kwargs):
        if self.type is ImportString and isinstance(value, str):
            return _import_string(value)
        return value
