"""`vllm serve`'s argument parser, built from the generated table of vLLM's own arguments
(flags_generated.py, made by lab/vllm_standin/gen_flags.py from the vLLM release it names).

Behaves like vLLM's FlexibleArgumentParser (vllm/utils/argparse_utils.py) where the product can
notice: `--snake_case` spellings, `--enable-X`/`--disable-X`/`--no-X` for boolean flags
(EnableDisableAction), `-O3` for `--optimization-level 3`, `--json-arg.key value` for JSON flags,
`--task`'s hint, abbreviations (argparse's default, which vLLM keeps), and errors with exit 2:
`vllm serve: error: unrecognized arguments: --foo`. Values are type-checked (int, float, JSON,
human-readable ints like 32k) and choices enforced where vLLM enforces them.
"""

import argparse
import json
import re
import sys

from .flags_generated import SERVE_ARGS, VLLM_VERSION

_HUMAN_INT = re.compile(r"^\d+(\.\d+)?[kKmMgGtT]?$")


def _typed(kind, optional):
    def convert(val):
        if optional and val in ("", "None"):
            return None
        if kind == "int":
            return int(val)
        if kind == "float":
            return float(val)
        if kind == "json":
            return json.loads(val)
        if kind == "human_int":
            if not _HUMAN_INT.match(val.strip()):
                raise ValueError(val)
            return val
        if kind == "human_int_or_auto":
            if val.strip().lower() != "auto" and val.strip() != "-1" and not _HUMAN_INT.match(val.strip()):
                raise ValueError(val)
            return val
        return val

    convert.__name__ = {"json": "loads"}.get(kind, kind)   # argparse names it in "invalid X value"
    return convert


class EnableDisableAction(argparse.Action):
    """vLLM's BooleanOptionalAction: --X / --no-X, and --enable-Y <-> --disable-Y."""

    def __init__(self, option_strings, dest, negatives=(), **kwargs):
        super().__init__(option_strings, dest, nargs=0, **kwargs)
        self.negatives = set(negatives)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, option_string not in self.negatives)


class FlexibleArgumentParser(argparse.ArgumentParser):
    """The argument pre-processing of vLLM's FlexibleArgumentParser.parse_args()."""

    def error(self, message):
        if (message.startswith("unrecognized arguments:") and getattr(self, "_serve_task_hint", False)
                and re.search(r"(^|\s)--task(=|\s|$)", message)):
            message += ("\n\nHint: --task is not a vllm serve option. For embedding, reranking, or reward "
                        "models, use --runner pooling. To adapt a generative model for pooling, also use "
                        "--convert embed, --convert classify, or --convert reward.")
        super().error(message)

    def parse_args(self, args=None, namespace=None):  # noqa: D401
        args = list(sys.argv[1:] if args is None else args)
        self._serve_task_hint = args[:1] == ["serve"] and any(re.match(r"^--task(=.+|$)", a) for a in args[1:])
        out = []
        dotted = {}
        i = 0
        while i < len(args):
            a = args[i]
            if a.startswith("--"):
                key, sep, val = a.partition("=")
                head, dot, rest = key[2:].partition(".")
                head = head.replace("_", "-")
                if dot:  # --json-arg.key value  -> one JSON object per flag, as vLLM merges them
                    if not sep:
                        if i + 1 >= len(args):
                            self.error(f"argument --{head}: expected one argument")
                        val = args[i + 1]
                        i += 1
                    path = rest.split(".")
                    if path[-1].endswith("+"):
                        path[-1] = path[-1][:-1]
                        val = json.dumps(val.split(","))
                    try:
                        value = json.loads(val)
                    except ValueError:
                        value = val
                    node = dotted.setdefault("--" + head, {})
                    for p in path[:-1]:
                        node = node.setdefault(p, {})
                    node[path[-1]] = value
                    i += 1
                    continue
                out.append("--" + head + (sep + val if sep else ""))
            elif a.startswith("-O") and a != "-O":
                out += ["--optimization-level", a[3:] if a[2:3] == "=" else a[2:]]
            elif a == "-O" and i + 1 < len(args) and args[i + 1] in {"0", "1", "2", "3"}:
                out.append("--optimization-level")
            else:
                out.append(a)
            i += 1
        for flag, obj in dotted.items():
            out += [flag, json.dumps(obj)]
        return super().parse_args(out, namespace)


def _add(parser, row):
    if "positional" in row:
        parser.add_argument(row["positional"], nargs=row.get("nargs"))
        return
    kw = {"dest": row["dest"], "default": None}
    action = row["action"]
    if action == "store_true":
        parser.add_argument(*row["options"], action="store_true", **kw)
        return
    if action == "boolean_optional":
        parser.add_argument(*row["options"], action=EnableDisableAction, negatives=row.get("negatives", ()), **kw)
        return
    kind = row.get("type", "str")
    kw["type"] = _typed(kind if kind != "json_or_str" else "str", row.get("optional", False))
    if "choices" in row:
        kw["choices"] = list(row["choices"]) + ([None] if row.get("optional") else [])
    if "nargs" in row:
        kw["nargs"] = row["nargs"]
    if "const" in row:
        kw["const"] = row["const"]
    if action == "append":
        kw["action"] = "append"
    parser.add_argument(*row["options"], **kw)


def build_parser():
    parser = FlexibleArgumentParser(prog="vllm", description="vLLM CLI (LAB STAND-IN, spark-cluster lab)")
    parser.add_argument("-v", "--version", action="store_true")
    sub = parser.add_subparsers(dest="subcommand", parser_class=argparse.ArgumentParser)
    serve = sub.add_parser("serve", prog="vllm serve", usage="vllm serve [model_tag] [options]",
                           help=f"Start the vLLM OpenAI Compatible API server (flags of vLLM {VLLM_VERSION}).")
    for row in SERVE_ARGS:
        _add(serve, row)
    return parser
