"""Allow-list of `vllm serve` flags, taken from vLLM's own argument definitions
(vllm/engine/arg_utils.py EngineArgs.add_cli_args and vllm/entrypoints/openai/cli_args.py,
vLLM 0.10/0.11). Anything else is rejected by argparse exactly like vLLM rejects it.

Each entry: (flag, aliases, kind, extra) where kind is
  "value"   takes one value (extra: type or choices)
  "multi"   takes one or more values
  "bool"    store_true (extra True: also accepts --no-<flag>, vLLM's BooleanOptionalAction)
"""

import argparse

DTYPES = ["auto", "half", "float16", "bfloat16", "float", "float32"]
KV_CACHE_DTYPES = ["auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla"]
LOAD_FORMATS = ["auto", "pt", "safetensors", "npcache", "dummy", "tensorizer", "runai_streamer",
                "runai_streamer_sharded", "sharded_state", "gguf", "bitsandbytes", "mistral",
                "fastsafetensors"]
EXECUTORS = ["ray", "mp", "uni", "external_launcher"]
LOG_LEVELS = ["critical", "error", "warning", "info", "debug", "trace"]

SERVE_FLAGS = [
    # --- frontend (vllm/entrypoints/openai/cli_args.py) ---
    ("--host", [], "value", str),
    ("--port", [], "value", int),
    ("--uds", [], "value", str),
    ("--uvicorn-log-level", [], "value", LOG_LEVELS),
    ("--disable-uvicorn-access-log", [], "bool", False),
    ("--allow-credentials", [], "bool", False),
    ("--allowed-origins", [], "value", str),
    ("--allowed-methods", [], "value", str),
    ("--allowed-headers", [], "value", str),
    ("--api-key", [], "multi", str),
    ("--lora-modules", [], "multi", str),
    ("--chat-template", [], "value", str),
    ("--chat-template-content-format", [], "value", ["auto", "string", "openai"]),
    ("--response-role", [], "value", str),
    ("--ssl-keyfile", [], "value", str),
    ("--ssl-certfile", [], "value", str),
    ("--ssl-ca-certs", [], "value", str),
    ("--enable-ssl-refresh", [], "bool", False),
    ("--ssl-cert-reqs", [], "value", int),
    ("--root-path", [], "value", str),
    ("--middleware", [], "multi", str),
    ("--return-tokens-as-token-ids", [], "bool", False),
    ("--disable-frontend-multiprocessing", [], "bool", False),
    ("--enable-request-id-headers", [], "bool", False),
    ("--enable-auto-tool-choice", [], "bool", False),
    ("--exclude-tools-when-tool-choice-none", [], "bool", False),
    ("--tool-call-parser", [], "value", str),
    ("--tool-parser-plugin", [], "value", str),
    ("--tool-server", [], "value", str),
    ("--log-config-file", [], "value", str),
    ("--max-log-len", [], "value", int),
    ("--disable-fastapi-docs", [], "bool", False),
    ("--enable-prompt-tokens-details", [], "bool", False),
    ("--enable-server-load-tracking", [], "bool", False),
    ("--enable-force-include-usage", [], "bool", False),
    ("--enable-tokenizer-info-endpoint", [], "bool", False),
    ("--enable-log-outputs", [], "bool", False),
    ("--h11-max-incomplete-event-size", [], "value", int),
    ("--h11-max-header-count", [], "value", int),
    ("--log-error-stack", [], "bool", False),
    ("--headless", [], "bool", False),
    ("--api-server-count", ["-asc"], "value", int),
    ("--config", [], "value", str),
    ("--disable-log-requests", [], "bool", False),
    ("--enable-log-requests", [], "bool", False),
    ("--disable-log-stats", [], "bool", False),
    ("--reasoning-parser", [], "value", str),
    # --- ModelConfig ---
    ("--model", [], "value", str),
    ("--runner", [], "value", ["auto", "generate", "pooling", "draft"]),
    ("--convert", [], "value", ["auto", "none", "embed", "classify", "reward"]),
    ("--task", [], "value", str),
    ("--tokenizer", [], "value", str),
    ("--tokenizer-mode", [], "value", ["auto", "slow", "mistral", "custom"]),
    ("--trust-remote-code", [], "bool", True),
    ("--dtype", [], "value", DTYPES),
    ("--seed", [], "value", int),
    ("--hf-config-path", [], "value", str),
    ("--allowed-local-media-path", [], "value", str),
    ("--revision", [], "value", str),
    ("--code-revision", [], "value", str),
    ("--rope-scaling", [], "value", str),
    ("--rope-theta", [], "value", float),
    ("--tokenizer-revision", [], "value", str),
    ("--max-model-len", [], "value", str),
    ("--quantization", ["-q"], "value", str),
    ("--enforce-eager", [], "bool", True),
    ("--max-seq-len-to-capture", [], "value", int),
    ("--max-logprobs", [], "value", int),
    ("--logprobs-mode", [], "value", str),
    ("--disable-sliding-window", [], "bool", True),
    ("--disable-cascade-attn", [], "bool", True),
    ("--skip-tokenizer-init", [], "bool", True),
    ("--enable-prompt-embeds", [], "bool", True),
    ("--served-model-name", [], "multi", str),
    ("--config-format", [], "value", ["auto", "hf", "mistral"]),
    ("--hf-token", [], "value", str),
    ("--hf-overrides", [], "value", str),
    ("--pooler-config", [], "value", str),
    ("--override-pooler-config", [], "value", str),
    ("--logits-processor-pattern", [], "value", str),
    ("--generation-config", [], "value", str),
    ("--override-generation-config", [], "value", str),
    ("--enable-sleep-mode", [], "bool", True),
    ("--model-impl", [], "value", ["auto", "vllm", "transformers", "terratorch"]),
    ("--override-attention-dtype", [], "value", str),
    ("--logits-processors", [], "multi", str),
    ("--io-processor-plugin", [], "value", str),
    # --- LoadConfig ---
    ("--load-format", [], "value", LOAD_FORMATS),
    ("--download-dir", [], "value", str),
    ("--model-loader-extra-config", [], "value", str),
    ("--ignore-patterns", [], "multi", str),
    ("--use-tqdm-on-load", [], "bool", True),
    ("--pt-load-map-location", [], "value", str),
    # --- StructuredOutputs / Decoding ---
    ("--guided-decoding-backend", [], "value", str),
    ("--structured-outputs-config", [], "value", str),
    # --- ParallelConfig ---
    ("--distributed-executor-backend", [], "value", EXECUTORS),
    ("--pipeline-parallel-size", ["-pp"], "value", int),
    ("--tensor-parallel-size", ["-tp"], "value", int),
    ("--decode-context-parallel-size", ["-dcp"], "value", int),
    ("--data-parallel-size", ["-dp"], "value", int),
    ("--data-parallel-rank", ["-dpn"], "value", int),
    ("--data-parallel-start-rank", ["-dpr"], "value", int),
    ("--data-parallel-size-local", ["-dpl"], "value", int),
    ("--data-parallel-address", ["-dpa"], "value", str),
    ("--data-parallel-rpc-port", ["-dpp"], "value", int),
    ("--data-parallel-backend", ["-dpb"], "value", ["mp", "ray"]),
    ("--data-parallel-hybrid-lb", [], "bool", True),
    ("--enable-expert-parallel", [], "bool", True),
    ("--enable-eplb", [], "bool", True),
    ("--eplb-config", [], "value", str),
    ("--max-parallel-loading-workers", [], "value", int),
    ("--ray-workers-use-nsight", [], "bool", True),
    ("--disable-custom-all-reduce", [], "bool", True),
    ("--worker-cls", [], "value", str),
    ("--worker-extension-cls", [], "value", str),
    ("--nnodes", ["-n"], "value", int),
    ("--node-rank", ["-r"], "value", int),
    ("--master-addr", [], "value", str),
    ("--master-port", [], "value", int),
    ("--enable-dbo", [], "bool", True),
    # --- CacheConfig ---
    ("--block-size", [], "value", int),
    ("--gpu-memory-utilization", [], "value", float),
    ("--swap-space", [], "value", float),
    ("--kv-cache-dtype", [], "value", KV_CACHE_DTYPES),
    ("--num-gpu-blocks-override", [], "value", int),
    ("--enable-prefix-caching", [], "bool", True),
    ("--prefix-caching-hash-algo", [], "value", ["sha256", "sha256_cbor", "builtin"]),
    ("--cpu-offload-gb", [], "value", float),
    ("--calculate-kv-scales", [], "bool", True),
    ("--kv-cache-memory-bytes", [], "value", str),
    ("--kv-sharing-fast-prefill", [], "bool", True),
    ("--mamba-ssm-cache-dtype", [], "value", str),
    # --- MultiModalConfig ---
    ("--limit-mm-per-prompt", [], "value", str),
    ("--mm-processor-kwargs", [], "value", str),
    ("--mm-processor-cache-gb", [], "value", float),
    ("--disable-mm-preprocessor-cache", [], "bool", True),
    ("--mm-encoder-tp-mode", [], "value", ["weights", "data"]),
    ("--interleave-mm-strings", [], "bool", True),
    ("--skip-mm-profiling", [], "bool", True),
    # --- LoRAConfig ---
    ("--enable-lora", [], "bool", True),
    ("--enable-lora-bias", [], "bool", True),
    ("--max-loras", [], "value", int),
    ("--max-lora-rank", [], "value", int),
    ("--lora-extra-vocab-size", [], "value", int),
    ("--lora-dtype", [], "value", str),
    ("--max-cpu-loras", [], "value", int),
    ("--fully-sharded-loras", [], "bool", True),
    ("--default-mm-loras", [], "value", str),
    # --- ObservabilityConfig ---
    ("--show-hidden-metrics-for-version", [], "value", str),
    ("--otlp-traces-endpoint", [], "value", str),
    ("--collect-detailed-traces", [], "multi", str),
    # --- SchedulerConfig ---
    ("--max-num-batched-tokens", [], "value", int),
    ("--max-num-seqs", [], "value", int),
    ("--max-num-partial-prefills", [], "value", int),
    ("--max-long-partial-prefills", [], "value", int),
    ("--long-prefill-token-threshold", [], "value", int),
    ("--cuda-graph-sizes", [], "multi", int),
    ("--num-lookahead-slots", [], "value", int),
    ("--scheduler-delay-factor", [], "value", float),
    ("--preemption-mode", [], "value", ["recompute", "swap"]),
    ("--num-scheduler-steps", [], "value", int),
    ("--scheduling-policy", [], "value", ["fcfs", "priority"]),
    ("--enable-chunked-prefill", [], "bool", True),
    ("--disable-chunked-mm-input", [], "bool", True),
    ("--scheduler-cls", [], "value", str),
    ("--disable-hybrid-kv-cache-manager", [], "bool", True),
    ("--async-scheduling", [], "bool", True),
    # --- VllmConfig ---
    ("--speculative-config", [], "value", str),
    ("--kv-transfer-config", [], "value", str),
    ("--kv-events-config", [], "value", str),
    ("--compilation-config", ["-O"], "value", str),
    ("--additional-config", [], "value", str),
    # --- attention backend (vLLM >= 0.11; older releases use VLLM_ATTENTION_BACKEND) ---
    ("--attention-backend", [], "value", str),
]


class _UnderscoreParser(argparse.ArgumentParser):
    """vLLM's FlexibleArgumentParser accepts --tensor_parallel_size as --tensor-parallel-size."""

    def parse_args(self, args=None, namespace=None):  # noqa: D401
        fixed = []
        for a in args or []:
            if a.startswith("--") and "_" in a.split("=", 1)[0]:
                key, sep, val = a.partition("=")
                a = key.replace("_", "-") + sep + val
            fixed.append(a)
        return super().parse_args(fixed, namespace)


def _add(parser, flag, aliases, kind, extra):
    dest = flag[2:].replace("-", "_")
    names = [flag, *aliases]
    if kind == "bool":
        parser.add_argument(*names, dest=dest, action="store_true", default=None)
        if extra:
            parser.add_argument("--no-" + flag[2:], dest=dest, action="store_false")
    elif kind == "multi":
        parser.add_argument(*names, dest=dest, nargs="+", type=extra)
    elif isinstance(extra, list):
        parser.add_argument(*names, dest=dest, choices=extra)
    else:
        parser.add_argument(*names, dest=dest, type=extra)


def build_parser():
    parser = _UnderscoreParser(prog="vllm", allow_abbrev=False,
                               description="vLLM CLI (LAB STAND-IN, spark-cluster lab)")
    parser.add_argument("-v", "--version", action="store_true")
    sub = parser.add_subparsers(dest="subcommand")
    serve = sub.add_parser("serve", prog="vllm serve", allow_abbrev=False,
                           usage="vllm serve [model_tag] [options]",
                           help="Start the vLLM OpenAI Compatible API server.")
    serve.add_argument("model_tag", nargs="?")
    for flag, aliases, kind, extra in SERVE_FLAGS:
        _add(serve, flag, aliases, kind, extra)
    return parser
