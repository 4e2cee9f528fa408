#!/usr/bin/env python3
"""Generate one SGLang release's server flag table from SGLang's own argument definitions.

    python3 lab/sglang_standin/gen_flags.py SGLANG_WHEEL [-o OUT.json]

(lab/sglang_standin/gen_flags.sh downloads the release from PyPI and calls this.) The tables are
config/sglangFlags/<version>.json: the product's tests check the argv it renders against them
(test/unit/sglang.test.ts), the lab's SGLang stand-in builds its parser from them.

`python3 -m sglang.launch_server ARGS` and `sglang serve ARGS` both parse ARGS with
prepare_server_args() (sglang/srt/server_args.py): `argparse.ArgumentParser(prog="sglang serve")`
and ServerArgs.add_cli_args(parser), which in 0.5.23 is

* add_cli_args_from_dataclass(parser, ServerArgs) (sglang/srt/arg_groups/arg_utils.py): one flag
  per field of the namespace classes ServerArgs collects (_INPUT_NAMESPACES in server_args.py,
  the classes of sglang/srt/arg_groups/fields/*.py), whose annotation is `A[T, "help"]` or
  `A[T, Arg(...)]`; the rules of that function (cli_name/aliases, Literal -> choices, list ->
  nargs "+", bool -> store_true, a custom action, required when there is no default) are
  mirrored below;
* then a few explicit add_argument() calls (dynamic choices, --config, deprecated spellings).

All of it is read with Python's `ast` module, without importing SGLang (that needs torch). A flag
whose choices cannot be worked out statically is kept, with its choices left out (the stand-in
then accepts any value for it) and listed under "unresolved".
"""

import argparse
import ast
import hashlib
import json
import os
import sys
import zipfile

FIELDS_DIR = "sglang/srt/arg_groups/fields/"
SERVER_ARGS = "sglang/srt/server_args.py"
TYPE_PARSERS = {"human_readable_int": "human_int", "json.loads": "json", "json_list_type": "json",
                "nullable_str": "str"}
NO_VALUE_ACTIONS = {"store_true", "store_false", "store_const", "boolean_optional", "count", "help", "version"}


class Source:
    """The sglang/ package's Python files, read from the wheel without unpacking it."""

    def __init__(self, path):
        self.path = path
        self.files = {}
        with zipfile.ZipFile(path) as zf:
            for name in zf.namelist():
                if name.startswith("sglang/") and name.endswith(".py"):
                    self.files[name] = zf.read(name).decode("utf-8")
            meta = next((n for n in zf.namelist() if n.endswith(".dist-info/METADATA")), None)
            text = zf.read(meta).decode("utf-8") if meta else ""
            self.version = next((ln.split(":", 1)[1].strip() for ln in text.splitlines()
                                 if ln.startswith("Version:")), "unknown")
        if SERVER_ARGS not in self.files:
            raise SystemExit(f"gen_flags: {path} has no {SERVER_ARGS}")
        with open(path, "rb") as fh:
            self.sha256 = hashlib.sha256(fh.read()).hexdigest()

    def tree(self, name):
        return ast.parse(self.files[name])


def module_constants(tree):
    """Top-level NAME = <literal list/tuple/set(...)> of a module, as Python values."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Call) and ast.unparse(value.func) in ("set", "list", "tuple") and value.args:
                value = value.args[0]
            if isinstance(value, ast.Name) and value.id in out:
                out[node.targets[0].id] = out[value.id]
                continue
            try:
                out[node.targets[0].id] = list(ast.literal_eval(value))
            except (ValueError, TypeError, SyntaxError):
                pass
    return out


class Extractor:
    def __init__(self, src):
        self.src = src
        self.constants = module_constants(src.tree("sglang/srt/arg_groups/choices.py"))
        self.unresolved = []

    def choices(self, node, where):
        found = self.literal_choices(node)
        if found is None:
            self.unresolved.append(f"{where}: choices={ast.unparse(node)} (left out: any value accepted)")
        return found

    def literal_choices(self, node):
        try:
            return list(ast.literal_eval(node))
        except (ValueError, TypeError, SyntaxError):
            pass
        if isinstance(node, ast.Name) and node.id in self.constants:
            return list(self.constants[node.id])
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):   # ["auto"] + X
            left, right = self.literal_choices(node.left), self.literal_choices(node.right)
            if left is not None and right is not None:
                return left + right
        return None

    # ---- the namespace classes, in _INPUT_NAMESPACES order ----
    def namespaces(self):
        tree = self.src.tree(SERVER_ARGS)
        for node in tree.body:
            if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "_INPUT_NAMESPACES":
                return [e.id for e in node.value.elts]
        raise SystemExit(f"gen_flags: no _INPUT_NAMESPACES in {SERVER_ARGS} (SGLang changed: update gen_flags.py)")

    def classes(self):
        found = {}
        for name in sorted(self.src.files):
            if name.startswith(FIELDS_DIR):
                for node in self.src.tree(name).body:
                    if isinstance(node, ast.ClassDef):
                        found[node.name] = (name, node)
        return found

    def field_rows(self):
        classes = self.classes()
        fields = []     # (field name, annotation, default node, file, line)
        for ns in self.namespaces():
            if ns not in classes:
                raise SystemExit(f"gen_flags: namespace class {ns} not found under {FIELDS_DIR}")
            path, cls = classes[ns]
            for node in cls.body:
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    fields.append((node.target.id, node.annotation, node.value, path, node.lineno))
        order = list(ast.literal_eval(next(
            n.value for n in self.src.tree("sglang/srt/arg_groups/field_order.py").body
            if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "POSITIONAL_FIELD_ORDER")))
        rank = {n: i for i, n in enumerate(order)}
        fields.sort(key=lambda f: rank.get(f[0], len(order)))   # sorted() is stable: the rest keep declaration order
        rows = []
        for name, ann, default_node, path, line in fields:
            row = self.field_row(name, ann, default_node, f"{path}:{line}")
            if row is not None:
                rows.append(row)
        return rows

    def field_row(self, name, ann, default_node, where):
        """add_cli_args_from_dataclass() for one field (None: no CLI flag)."""
        if not (isinstance(ann, ast.Subscript) and ast.unparse(ann.value) in ("A", "Annotated")
                and isinstance(ann.slice, ast.Tuple)):
            return None
        inner, *meta = ann.slice.elts
        arg = {}
        for m in meta:
            if isinstance(m, ast.Constant) and isinstance(m.value, str):
                arg = {"help": m}
                break
            if isinstance(m, ast.Call) and ast.unparse(m.func) == "Arg":
                arg = {kw.arg: kw.value for kw in m.keywords}
                break
        else:
            return None   # no Arg / help string: skipped, as add_cli_args_from_dataclass does
        if "no_cli" in arg and ast.literal_eval(arg["no_cli"]):
            return None
        cli_name = ast.literal_eval(arg["cli_name"]) if "cli_name" in arg else "--" + name.replace("_", "-")
        names = [cli_name] + (list(ast.literal_eval(arg["aliases"])) if "aliases" in arg else [])
        row = {"options": names, "dest": name}
        has_default = default_node is not None
        if has_default:
            try:
                value = ast.literal_eval(default_node)
                if value is None or isinstance(value, (str, int, float, bool)):
                    row["default"] = value
            except (ValueError, TypeError, SyntaxError):
                pass
        if "action" in arg:
            action = ast.unparse(arg["action"])
            if action == "argparse.BooleanOptionalAction":
                row["action"] = "boolean_optional"
                row["negatives"] = ["--no-" + n[2:] for n in names if n.startswith("--")]
                row["options"] = names + row["negatives"]
            else:
                row["action"] = f"custom:{action}"
                kwargs = {}
                if isinstance(arg.get("action_kwargs"), ast.Dict):   # {"type": str, "nargs": "*"}
                    kwargs = {ast.literal_eval(k): v for k, v in zip(arg["action_kwargs"].keys,
                                                                     arg["action_kwargs"].values)}
                if "nargs" in kwargs:
                    row["nargs"] = ast.literal_eval(kwargs["nargs"])
                row["type"] = {"int": "int", "float": "float"}.get(ast.unparse(kwargs["type"]), "str") \
                    if "type" in kwargs else "str"
            row["source"] = where
            return row
        inner_src = ast.unparse(inner)
        optional = False
        for wrap in ("Optional[",):
            if inner_src.startswith(wrap) and inner_src.endswith("]"):
                inner_src, optional = inner_src[len(wrap):-1], True
        if inner_src.endswith(" | None"):
            inner_src, optional = inner_src[: -len(" | None")], True
        if inner_src.startswith("None | "):
            inner_src, optional = inner_src[len("None | "):], True
        type_parser = ast.unparse(arg["type_parser"]) if "type_parser" in arg else None
        row["action"] = "store"
        if inner_src.startswith("Literal["):
            lit = ast.parse(inner_src, mode="eval").body.slice    # Literal[a, b] or Literal[a]
            values = [ast.literal_eval(e) for e in (lit.elts if isinstance(lit, ast.Tuple) else [lit])]
            choices = self.choices(arg["choices"], where) if "choices" in arg else values
            row["type"] = TYPE_PARSERS.get(type_parser, "str") if type_parser else \
                {int: "int", float: "float"}.get(type(values[0]), "str")
            if choices is not None:
                row["choices"] = choices
        elif (inner_src.startswith("list[") or inner_src.startswith("List[")) and type_parser is None:
            elem = inner_src[5:-1]
            row["type"] = {"int": "int", "float": "float"}.get(elem, "str")
            row["nargs"] = ast.literal_eval(arg["nargs"]) if "nargs" in arg else "+"
            if "choices" in arg:
                choices = self.choices(arg["choices"], where)
                if choices is not None:
                    row["choices"] = choices
        elif inner_src == "bool":
            row["action"] = "store_true"
        else:
            row["type"] = TYPE_PARSERS.get(type_parser, "str") if type_parser else \
                {"int": "int", "float": "float"}.get(inner_src, "str")
            if type_parser and type_parser not in TYPE_PARSERS:
                self.unresolved.append(f"{where}: type_parser={type_parser} (taken as str)")
            if "choices" in arg:
                choices = self.choices(arg["choices"], where)
                if choices is not None:
                    row["choices"] = choices
            if "nargs" in arg:
                row["nargs"] = ast.literal_eval(arg["nargs"])
            required = ast.literal_eval(arg["required"]) if "required" in arg else None
            if required is True or (required is None and not has_default):
                row["required"] = True
        if optional:
            row["optional"] = True
        row["source"] = where
        return row

    def explicit_rows(self):
        """The add_argument() calls of ServerArgs.add_cli_args after add_cli_args_from_dataclass()."""
        tree = self.src.tree(SERVER_ARGS)
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs")
        fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "add_cli_args")
        env = {}
        rows = []
        for st in ast.walk(fn):
            if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name):
                env[st.targets[0].id] = st.value
        for st in fn.body:
            call = st.value if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) else None
            if call is None or not ast.unparse(call.func).endswith(".add_argument"):
                continue
            names = [a.value for a in call.args if isinstance(a, ast.Constant)]
            kw = {k.arg: k.value for k in call.keywords}
            where = f"{SERVER_ARGS}:{st.lineno}"
            row = {"options": names, "dest": ast.literal_eval(kw["dest"]) if "dest" in kw else
                   names[0].lstrip("-").replace("-", "_")}
            action = kw.get("action")
            if action is None:
                row["action"] = "store"
            elif isinstance(action, ast.Constant):
                row["action"] = action.value
            else:
                row["action"] = f"custom:{ast.unparse(action)}"
                # the Deprecated* actions of arg_groups/argparse_actions.py default to nargs=0
                nargs = ast.literal_eval(kw["nargs"]) if "nargs" in kw else 0
                if nargs != 0:
                    row["nargs"] = nargs
                else:
                    row["nargs"] = 0
            if "type" in kw:
                row["type"] = {"int": "int", "float": "float"}.get(ast.unparse(kw["type"]), "str")
            elif row["action"] == "store" or (row["action"].startswith("custom:") and row.get("nargs") != 0):
                row["type"] = "str"
            if "choices" in kw:
                node = kw["choices"]
                if isinstance(node, ast.Name) and node.id in env:
                    node = env[node.id]
                if isinstance(node, ast.Call) and ast.unparse(node.func) == "set" and node.args:
                    node = node.args[0]
                choices = self.choices(node, where)
                if choices is not None:
                    row["choices"] = choices
            if "default" in kw:
                try:
                    row["default"] = ast.literal_eval(kw["default"])
                except (ValueError, TypeError, SyntaxError):
                    pass
            row["source"] = where
            rows.append(row)
        return rows


def render(src, rows, unresolved):
    header = {
        "version": src.version,
        "distribution": "sglang",
        "wheel": os.path.basename(src.path),
        "sha256": src.sha256,
        "prog": "sglang serve",
        "generated_by": f"lab/sglang_standin/gen_flags.sh {src.version} (gen_flags.py, from "
                        f"ServerArgs.add_cli_args() in {SERVER_ARGS} and the {FIELDS_DIR}*.py fields it registers)",
        "unresolved": sorted(set(unresolved)),
    }
    lines = ["{"]
    for k, v in header.items():
        lines.append(f"  {json.dumps(k)}: {json.dumps(v)},")
    lines.append('  "args": [')
    for n, row in enumerate(rows):
        row = dict(row, takes_value=row["action"] not in NO_VALUE_ACTIONS and row.get("nargs") != 0)
        lines.append("    " + json.dumps(row) + ("," if n + 1 < len(rows) else ""))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wheel", help="SGLang wheel (.whl) from PyPI")
    ap.add_argument("-o", "--output", help="write the table (JSON) here (default: stdout)")
    a = ap.parse_args(argv)
    src = Source(a.wheel)
    ex = Extractor(src)
    rows = ex.field_rows() + ex.explicit_rows()
    seen = {}
    for row in rows:
        for o in row["options"]:
            if o in seen:
                raise SystemExit(f"gen_flags: {o} registered twice ({seen[o]}, {row['source']}): argparse would refuse")
            seen[o] = row["source"]
    for u in sorted(set(ex.unresolved)):
        print(f"gen_flags: unresolved: {u}", file=sys.stderr)
    text = render(src, rows, ex.unresolved)
    json.loads(text)
    if a.output:
        with open(a.output, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"gen_flags: {len(rows)} arguments ({len(seen)} spellings) of SGLang {src.version} -> {a.output}",
              file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
