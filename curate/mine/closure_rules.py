"""Library-specific closure rules: transformers' auto classes and the sub-models a composite
builds through them, configuration classes and classes a constructor is passed, library
loggers, typing names, registrations and backends."""

from __future__ import annotations

import ast
import re
import textwrap
from functools import lru_cache
from pathlib import Path

from curate.mine import shims
from curate.mine.closure_emit import _State, _common_prefix
from curate.mine.closure_types import ClosureError, Entity, _IMPORTS, _LOGGER_STMT, _SHIM
from curate.mine.index import FileIndex



#: Attributes and methods every ``nn.Module`` has: read off a parameter, they say nothing of its class.
#: (Written out: the resolver runs where torch is not imported.)
_MODULE_ATTRS = frozenset({
    "training", "forward", "parameters", "named_parameters", "buffers", "named_buffers", "modules", "named_modules",
    "children", "named_children", "to", "cpu", "cuda", "half", "float", "double", "bfloat16", "type", "eval", "train",
    "apply", "state_dict", "load_state_dict", "register_buffer", "register_parameter", "add_module", "get_submodule",
    "zero_grad", "requires_grad_", "extra_repr", "_modules", "_parameters", "_buffers"})

class _LibraryRules:
    """Library-specific rules of a :class:`curate.mine.closure.Resolver`."""

    def _auto_submodels(self, st: _State, via: str) -> None:
        """Copy the sub-models a transformers composite builds through the auto classes.

        When the closure holds the stand-ins of ``AutoModel``/``AutoBackbone``/``AutoConfig``/
        ``CONFIG_MAPPING``, the model types its copied code names (``SubConfigSpec(model_type=
        "llama")``, ``CONFIG_MAPPING["resnet"]``, ``{"model_type": "dinov2"}``,
        ``default_config_type="hgnet_v2"``) get their configuration class, and their base model
        or backbone class, copied from transformers (``models/<type>/configuration_<type>.py``,
        ``modeling_<type>.py``, named by its auto mappings); so does the model of each
        configuration class copied whose model is built through ``AutoModel``
        (``Qwen3_5VisionConfig`` -> ``Qwen3_5VisionModel``). Repeated for what those copies
        name; a class that cannot be copied (too large, another missing import) is left out
        and its auto class raises ``ImportError`` when asked for it."""
        auto = {n for (m, n) in st.names if m == _SHIM + "transformers.models.auto"}
        if not auto & {"AutoModel", "AutoBackbone", "AutoConfig", "CONFIG_MAPPING"}:
            return
        maps = self._auto_mappings()
        if not maps:
            return
        configs, models, backbones, special = maps
        done: set[str] = set()
        scanned: dict[str, set[int]] = {}  # each round reads only the statements copied since
        for _ in range(3):
            types, own = set(), set()
            for mod, stmts in list(st.stmts.items()):
                if not mod.startswith("transformers."):
                    continue
                idx = self.load(mod)
                fresh = stmts - scanned.setdefault(mod, set())
                scanned[mod] |= fresh
                for i in fresh:
                    code = idx.stmts[i].code
                    types |= set(_SUB_TYPE.findall(code))
                    if idx.stmts[i].kind == "class":
                        own |= set(_OWN_TYPE.findall(code))
            want = {t: [n for n in (backbones.get(t) if "AutoBackbone" in auto else None, models.get(t)) if n]
                    for t in sorted(types - done)}
            if "AutoModel" in auto:
                want.update({t: [models[t]] for t in sorted(own - types - done) if t in models})
            done |= types | own
            if not want:
                return
            for t, names in want.items():
                mod, conf = self._auto_files(t, special)
                for name in names:
                    self._try_copy(mod, name, st, via, complete=True)
                # a type whose models could not be copied keeps no configuration either, so
                # the composite falls back to its default sub-model (DETR: ResNet, not timm)
                if t in configs and (not names or any((mod, n) in st.names for n in names)):
                    self._try_copy(conf, configs[t], st, via, complete=True)

    def _auto_files(self, model_type: str, special: dict) -> tuple[str, str]:
        """The modeling and configuration modules of ``model_type``: ``models/<folder>/
        modeling_<type>.py`` where the folder holds several (``rt_detr_resnet`` in ``rt_detr``),
        else ``modeling_<folder>.py``."""
        folder = special.get(model_type, model_type.replace("-", "_"))
        out = []
        for kind in ("modeling", "configuration"):
            own = f"transformers.models.{folder}.{kind}_{model_type.replace('-', '_')}"
            out.append(own if self.module_path(own) is not None else f"transformers.models.{folder}.{kind}_{folder}")
        return out[0], out[1]

    def _auto_mappings(self) -> tuple[dict, dict, dict, dict] | None:
        """transformers' model type -> configuration class, base model class, backbone class,
        and model folder (where it differs from the type), read from its auto mappings."""
        paths = [self.module_path(f"transformers.models.auto.{m}") for m in ("auto_mappings", "modeling_auto")]
        if any(p is None or p.is_relative_to(shims.path("curate.unavailable").parent) for p in paths):
            return None
        return _read_auto_mappings(str(paths[0]), str(paths[1]))

    def _needs_backend(self, ent: Entity) -> bool:
        """Whether class ``ent`` asks transformers for another package when built
        (``requires_backends(self, "timm")``): a problem cannot have it."""
        code = self._class_code(ent)
        return code is not None and "requires_backends(" in code

    def _class_code(self, ent: Entity) -> str | None:
        """The source of class ``ent``'s statement, or None where its module's index has no
        such class."""
        idx = self.load(ent[0])
        info = idx.classes.get(ent[1]) if idx is not None else None
        return idx.stmts[info.stmt].code if info is not None else None

    def _passed_classes(self, module: str, class_name: str) -> list[str]:
        """Classes of the module that its own code passes to ``class_name`` (the factories
        ``senet154()`` -> ``SENet(SEBottleneck, [3, 8, 36, 3], ...)``, ``resnet18()`` ->
        ``ResNet(BasicBlock, ...)``): the building blocks a ``block`` parameter takes, which the
        class itself never names. At most four, in source order."""
        idx = self.load(module)
        out: list[str] = []
        params = self._init_params(module, class_name)
        for stmt in idx.stmts:
            if class_name in stmt.defines or not (f"{class_name}(" in stmt.code or any(
                    f"{p}=" in stmt.code for p in params)):
                continue
            for func, args, keywords in _calls(stmt.code):
                if func == class_name:
                    passed = list(args) + [v for _, v in keywords]
                else:  # timm's ``model_args = dict(block=BasicBlock, layers=(2, 2, 2, 2))``
                    passed = [v for k, v in keywords if k in params]
                for arg in passed:
                    if arg and arg in idx.classes and arg not in out + [class_name]:
                        out.append(arg)
        return out[:4]

    def _init_params(self, module: str, class_name: str) -> set[str]:
        """Names of the parameters of ``class_name.__init__`` in ``module`` named for a class
        they take (``block``, ``block_fn``, ``layer_cls``, ``cell``, ``stem``, ``unit``)."""
        init = self._init_def(module, class_name)
        if init is None:
            return set()
        return {a.arg for a in init.args.args[1:] + init.args.kwonlyargs
                if re.search(r"(^|_)(block|block_fn|block_type|block_cls|layer_cls|cell|stem|unit)$", a.arg)}

    def _init_def(self, module: str, class_name: str) -> ast.FunctionDef | None:
        """The parsed ``__init__`` of class ``class_name`` of ``module``, or None (no such
        class, no ``__init__`` of its own, or source that does not parse)."""
        idx = self.load(module)
        try:
            code = idx.stmts[idx.classes[class_name].stmt].code
        except (KeyError, IndexError):
            return None
        return _parsed_init(code)  # cached: several rules read one class's __init__

    def _init_configs(self, module: str, class_name: str) -> list[str]:
        """Configuration classes the class's ``__init__`` takes, which annotations alone do not
        pull in: names in its parameters' annotations, or for an unannotated ``config``-like
        parameter the ``*Config`` name of the file closest to the class's name."""
        idx = self.load(module)
        init = self._init_def(module, class_name)
        if init is None:
            return []
        visible = self._defines(module, idx) | set(idx.imports)
        out: list[str] = []
        for arg in init.args.args[1:] + init.args.kwonlyargs:
            names = [n.id for n in ast.walk(arg.annotation) if isinstance(n, ast.Name)] if arg.annotation else []
            names += [n.value for n in ast.walk(arg.annotation) if isinstance(n, ast.Constant)
                      and isinstance(n.value, str) and n.value.isidentifier()] if arg.annotation else []
            hits = [n for n in names if n in visible and re.search(r"(Config|Args|Cfg|Params)$", n)]
            if not hits and arg.annotation is None and re.search(r"(^|_)(config|cfg|args)$", arg.arg):
                configs = [n for n in visible if n.endswith("Config")]
                if configs:
                    hits = [max(configs, key=lambda n: (_common_prefix(n, class_name), -len(n)))]
            out += [h for h in hits if h not in out]
        return out

    #: how deep configurations nested in configurations' fields are followed, and how many are copied
    MAX_CONFIG_NESTING = 2
    MAX_CONFIG_FIELDS = 6

    def _config_fields(self, module: str, name: str, _depth: int = 0) -> list[tuple[str, str]]:
        """Configuration classes that the required fields of configuration ``name`` (seen from
        ``module``) are annotated with, and theirs in turn, as (module, name): a dataclass or
        pydantic model whose ``block: BlockConfig`` (or ``Annotated[BlockConfig, ...]``) has no
        default needs a ``BlockConfig`` built for it, and names read only in annotations are
        not copied otherwise. The fields' own first, then theirs, at most
        :attr:`MAX_CONFIG_NESTING` levels and :attr:`MAX_CONFIG_FIELDS` classes."""
        try:
            ent = self.locate(module, name)
        except (ClosureError, RecursionError):
            return []
        if ent is None or ent[0] in _IMPORTS or ent[0].startswith(_SHIM) or ent[0].startswith("<"):
            return []
        code = self._class_code(ent)
        if code is None:
            return []
        if not re.search(r"^\s+\w+\s*:\s*[^=\n]*(Config|Args|Cfg|Params)\b[^=\n]*$", code, re.M):
            return []  # cheap test first: no required field annotated with a configuration
        try:
            tree = ast.parse(code)
        except SyntaxError:
            return []
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        out: list[tuple[str, str]] = []
        for stmt in body:
            if not (isinstance(stmt, ast.AnnAssign) and stmt.value is None and isinstance(stmt.target, ast.Name)):
                continue
            names = [n.id for n in ast.walk(stmt.annotation) if isinstance(n, ast.Name)]
            names += [w for n in ast.walk(stmt.annotation) if isinstance(n, ast.Constant)
                      and isinstance(n.value, str) for w in re.findall(r"[A-Za-z_]\w*", n.value)]
            for field_cls in names:
                if not re.search(r"(Config|Args|Cfg|Params)$", field_cls) or field_cls == ent[1]:
                    continue
                try:
                    got = self.locate(ent[0], field_cls)
                except (ClosureError, RecursionError):
                    continue
                if got is None or got[0] in _IMPORTS or got[0].startswith("<") or got in out:
                    continue
                out.append(got)
        if _depth + 1 < self.MAX_CONFIG_NESTING:  # the fields' own configurations after all fields
            for got in list(out):
                out += [g for g in self._config_fields(got[0], got[1], _depth + 1) if g not in out]
        return out[:self.MAX_CONFIG_FIELDS]

    def _config_implementations(self, module: str, name: str) -> list[tuple[str, str]]:
        """Up to two subclasses of configuration ``name`` (seen from ``module``) in the source,
        as (module, name), where it leaves methods to them (``@abstractmethod``, ``raise
        NotImplementedError``): olmo-core's blocks take ``sequence_mixer: SequenceMixerConfig``,
        whose ``build`` only ``AttentionConfig`` and its siblings define."""
        try:
            ent = self.locate(module, name)
        except (ClosureError, RecursionError):
            return []
        if ent is None or ent[0].startswith("<"):
            return []
        code = self._class_code(ent)
        if code is None:
            return []
        if "raise NotImplementedError" not in code and "abstractmethod" not in code:
            return []
        return self._subclasses(ent[1], ent[0])[:2]

    def _init_annotated(self, module: str, class_name: str) -> list[tuple[str, str]]:
        """Classes of the source that the class's required ``__init__`` parameters are annotated
        with (``manifold: Manifold``, ``scheduler: "SchedulerSDE"``), as (module, name): the
        objects they take, which annotations alone do not pull in. For a class whose methods
        are left to subclasses (``raise NotImplementedError``, ``@abstractmethod``), up to two of
        its subclasses in the source's indexed files come first (one to build). Configurations
        are :meth:`_init_configs`'."""
        init = self._init_def(module, class_name)
        if init is None:
            return []
        a = init.args
        required = a.args[1:len(a.args) - len(a.defaults)] + [k for k, d in zip(a.kwonlyargs, a.kw_defaults)
                                                                if d is None]
        out: list[tuple[str, str]] = []
        for arg in required:
            if arg.annotation is None:
                continue
            names = [n.id for n in ast.walk(arg.annotation) if isinstance(n, ast.Name)]
            names += [w for n in ast.walk(arg.annotation) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                      for w in re.findall(r"[A-Za-z_]\w*", n.value)]
            for name in names:
                if not name[:1].isupper() or name == class_name or re.search(r"(Config|Args|Cfg|Params)$", name):
                    continue
                try:
                    ent = self.locate(module, name)
                except (ClosureError, RecursionError):
                    continue
                if ent is None or ent[0] in _IMPORTS or ent[0].startswith(_SHIM):
                    continue
                info = self.load(ent[0]).classes.get(ent[1])
                if info is None:
                    continue
                code = self.load(ent[0]).stmts[info.stmt].code
                if "raise NotImplementedError" in code or "abstractmethod" in code:
                    out += [sub for sub in self._subclasses(ent[1], ent[0]) if sub not in out][:2]
                if ent not in out:
                    out.append(ent)
        return out[:4]

    def _attribute_providers(self, module: str, class_name: str) -> list[tuple[str, str]]:
        """Classes that define what the class reads off an unannotated required ``__init__``
        parameter (sliced-wasserstein's ``GSWD(projector)`` calls ``self.projector.reset()``;
        x-transformers-style ``AutoregressiveWrapper(net)`` reads ``net.max_seq_len``): classes
        of the module and of its package's other files that define every such attribute
        (a method, ``self.<attr> =``, a class attribute), as (module, class); at most two a
        parameter. Attributes every ``nn.Module`` has say nothing and are left out."""
        init = self._init_def(module, class_name)
        idx = self.load(module)
        if init is None or idx is None:
            return []
        a = init.args
        params = {x.arg for x in a.args[1:len(a.args) - len(a.defaults)] if x.annotation is None}
        code = idx.stmts[idx.classes[class_name].stmt].code
        # most classes read nothing off a parameter: a look at the text before parsing it
        if not params or not re.search(r"\b(?:%s)\s*\.\s*[A-Za-z_]" % "|".join(map(re.escape, params)), code):
            return []
        try:
            tree = ast.parse(textwrap.dedent(code))
        except SyntaxError:
            return []
        alias = {}  # self.<attr> = <param>
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in params:
                for t in node.targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        alias[t.attr] = node.value.id
        reads: dict[str, set[str]] = {}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
                continue
            v = node.value
            owner = v.id if isinstance(v, ast.Name) and v.id in params else (
                alias.get(v.attr) if isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name)
                and v.value.id == "self" else None)
            if owner and node.attr not in _MODULE_ATTRS and not node.attr.startswith("__"):
                reads.setdefault(owner, set()).add(node.attr)
        if not reads:
            return []
        path = self.module_path(module)
        mods = [module]
        if path is not None:
            package = module if path.name == "__init__.py" else module.rpartition(".")[0]
            mods += [f"{package}.{f.stem}" if package else f.stem for f in sorted(path.parent.glob("*.py"))[:50]
                     if f.name != "__init__.py" and f.stem != module.rpartition(".")[2]]
        out: list[tuple[str, str]] = []
        for attrs in reads.values():
            found = []
            for mod in mods:
                fi = self.load(mod)
                if fi is None:
                    continue
                for c, info in fi.classes.items():
                    if c == class_name or re.search(r"Base|Abstract|Mixin", c):
                        continue
                    code = fi.stmts[info.stmt].code
                    if all(x in code for x in attrs) and all(re.search(
                            rf"def {re.escape(x)}\b|self\.{re.escape(x)}\s*[:=]|^\s+{re.escape(x)}\s*[:=]", code, re.M)
                            for x in attrs):
                        found.append((mod, c))
                if len(found) >= 2:
                    break
            out += [f for f in found[:2] if f not in out]
        return out

    def _subclasses(self, name: str, module: str) -> list[tuple[str, str]]:
        """Classes with a base named ``name`` (not themselves named as bases, mixins or
        abstract), as (module, class): in the files indexed so far and in the files of
        ``module``'s package (where a base's implementations usually live)."""
        path = self.module_path(module)
        if path is not None:
            package = module if path.name == "__init__.py" else module.rpartition(".")[0]
            for f in sorted(path.parent.glob("*.py"))[:50]:
                if f.name != "__init__.py":
                    self.load(f"{package}.{f.stem}" if package else f.stem)
                elif package:  # the package's own file (olmo-core's ``AttentionConfig``)
                    self.load(package)
        out = []
        # a generic base (``SequenceMixerConfig["SequenceMixer"]``) is indexed as no name
        generic = re.compile(rf"^class \w+\([^)]*?(?<![\w.]){re.escape(name)}\[", re.M)
        for mod, fi in sorted(self.indexes.items()):
            if fi is None:
                continue
            out += [(mod, c) for c, info in fi.classes.items()
                    if (any(b.rsplit(".", 1)[-1] == name for b in info.bases)
                        or "" in info.bases and generic.search(fi.stmts[info.stmt].code))
                    and not re.search(r"Base|Abstract|Mixin|Interface", c)]
        return out

    def _library_logger(self, module: str, idx: FileIndex, defining: list[int]) -> bool:
        """Whether the definition is a module logger made by the source's own logging helper
        (``logger = get_logger(__name__)``, ``get_logger(log_level=logging.WARNING)``). Such helpers set up handlers, log folders
        (super-gradients makes ``~/sg_logs``) and environment reads, none of it part of a
        problem: the logger becomes the standard library's ``logging.getLogger(__name__)``.
        Helpers with a stand-in (transformers' logger warns once) are kept."""
        if module.startswith(_SHIM) or len(defining) != 1 or idx.stmts[defining[0]].kind != "assign":
            return False
        m = _LOGGER_STMT.match(idx.stmts[defining[0]].code)
        if m is None:
            return False
        head = m.group(1).split(".")[0]
        try:
            got = self.locate(module, head)
        except (ClosureError, RecursionError):
            return False
        return got is not None and got[0] not in _IMPORTS and not got[0].startswith(_SHIM)

    def _typing_name(self, module: str, name: str) -> bool:
        """Whether ``name`` at the top of ``module`` is a ``typing`` construct, ``torch``'s
        ``Tensor`` or a short type alias (``OptTensor = Optional[Tensor]``): copied for the
        annotations of message-passing layers, which torch_geometric's ``MessagePassing``
        evaluates when built (annotations elsewhere pull in nothing)."""
        try:
            ent = self.locate(module, name)
        except (ClosureError, RecursionError):
            return False
        if ent is None:
            return False
        if ent[0] == "<from>":
            return ent[1].split(":")[0] in ("typing", "typing_extensions", "torch")
        if ent[0] in _IMPORTS or ent[0].startswith(_SHIM):
            return False
        idx = self.load(ent[0])
        stmts = [idx.stmts[i] for i in self._defining(ent[0], idx, ent[1])] if idx else []
        return bool(stmts) and all(t.kind == "assign" and len(t.code) < 200 and re.search(
            r"\b(Optional|Union|Tuple|List|Dict|Callable)\[", t.code) for t in stmts)

    def _registrations(self, module: str, name: str, st: _State, via: str) -> None:
        """Copy the top-level statements of ``module`` that register entries into the object
        ``name`` binds: ``Act.add_factory_class("ELU", nn.ELU)`` and functions or classes
        decorated ``@Act.factory_function("swish")`` (monai's layer factories). Nothing reads
        them by name, yet ``Act.PRELU`` fails without them. Each is tried on a copy of the
        state and left out when it cannot be copied."""
        idx = self.load(module)
        pattern = re.compile(rf"(?:@[ \t]*)?{re.escape(name)}[ \t]*\.")
        for j, s in enumerate(idx.stmts):
            if j in st.stmts.get(module, ()) or s.kind not in ("call", "def", "class") or name not in s.code:
                continue
            first = next((ln.lstrip() for ln in s.code.splitlines()
                          if ln.strip() and not ln.lstrip().startswith("#")), "")
            if not pattern.match(first) or first.startswith("@") is (s.kind == "call"):
                continue
            trial = st.copy()
            try:
                for d in s.defines:
                    if (module, d) not in trial.names:
                        trial.claim((module, d), d)
                self._copy(module, [j], trial, via, name)
            except (ClosureError, RecursionError):
                continue
            st.__dict__.update(trial.__dict__)


#: model types a composite configuration or its code names for a sub-model
_SUB_TYPE = re.compile(r"""(?:\bmodel_type=|config_type=|["']model_type["']:\s*|CONFIG_MAPPING\[)\s*["']([\w-]+)["']""")
#: a configuration class's own model type (``model_type = "qwen3_5_vision"``)
_OWN_TYPE = re.compile(r"""^\s+model_type\s*(?::[^=]+)?\s=\s*["']([\w-]+)["']""", re.M)


@lru_cache(maxsize=4)
def _read_auto_mappings(mappings_path: str, modeling_path: str) -> tuple[dict, dict, dict, dict]:
    """The ``OrderedDict([(type, name), ...])`` tables of transformers' auto mappings files."""
    tables: dict[str, dict] = {}
    for path in (mappings_path, modeling_path):
        try:
            tree = ast.parse(Path(path).read_text(errors="replace"))
        except (OSError, SyntaxError):
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and isinstance(node.value, ast.Call) and node.value.args:
                try:
                    pairs = ast.literal_eval(node.value.args[0])
                    tables[node.targets[0].id] = {k: v for k, v in pairs if isinstance(v, str)}
                except (ValueError, TypeError, SyntaxError):
                    continue
    return (tables.get("CONFIG_MAPPING_NAMES", {}), tables.get("MODEL_MAPPING_NAMES", {}),
            tables.get("MODEL_FOR_BACKBONE_MAPPING_NAMES", {}), tables.get("SPECIAL_MODEL_TYPE_TO_MODULE_NAME", {}))


_Call = tuple[str | None, tuple[str | None, ...], tuple[tuple[str | None, str | None], ...]]


@lru_cache(maxsize=16384)  # each class of a module reads its module's statements: parsed once
def _calls(code: str) -> tuple[_Call, ...]:
    """The calls of a statement as (the called name, or None for another callee; the names
    passed positionally; (keyword, name) pairs), None where an argument is not a plain name."""
    try:
        tree = ast.parse(textwrap.dedent(code))
    except SyntaxError:
        return ()

    def name(node: ast.AST) -> str | None:
        return node.id if isinstance(node, ast.Name) else None

    return tuple((name(n.func), tuple(name(a) for a in n.args), tuple((k.arg, name(k.value)) for k in n.keywords))
                 for n in ast.walk(tree) if isinstance(n, ast.Call))


@lru_cache(maxsize=16)  # the closure of one class reads its __init__ for configurations and block classes
def _parsed_init(code: str) -> ast.FunctionDef | None:
    """The ``__init__`` defined in the class statement ``code``, parsed; None without one."""
    if "__init__" not in code:  # a fifth of transformers' classes: no tree to build
        return None
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    cls = tree.body[0] if tree.body and isinstance(tree.body[0], ast.ClassDef) else None
    return next((b for b in cls.body if isinstance(b, ast.FunctionDef) and b.name == "__init__"), None) \
        if cls else None
