"""`vllm bench serve` of the LAB STAND-IN (spark-cluster lab): a real load generator against an
OpenAI-compatible endpoint, stdlib only (threads + urllib), with vLLM 0.33's flag names
(vllm/benchmarks/serve.py add_cli_args, vllm/benchmarks/datasets/datasets.py add_dataset_parser)
and its result table (serve.py benchmark(): "Serving Benchmark Result", TTFT/TPOT/ITL sections).

What is real: the requests (streamed /v1/completions or /v1/chat/completions, the API key from
OPENAI_API_KEY as vLLM's _get_headers() reads it, x-request-id), the arrival process (inf: all at
once; else Poisson, or gamma with --burstiness, seeded by --seed), --max-concurrency, the timings
(TTFT = first streamed chunk, ITL = gaps between chunks, TPOT = (latency - TTFT) / (tokens - 1),
E2EL) and the arithmetic of vLLM's calculate_metrics() (numpy's linear percentiles).
What is not: there is no tokenizer. The random dataset's prompts are --random-input-len words from
a fixed vocabulary, and output tokens are the server's usage.completion_tokens (the lab server
counts words) or, without usage, the number of streamed chunks. Only --dataset-name random and
the openai / vllm / openai-chat backends are simulated; other choices exit 2 saying so.
Like vLLM, it exits 0 when requests failed (they are counted and the first errors printed).
"""

import argparse
import json
import math
import os
import random
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

VLLM_VERSION = "0.33.0"
MARK = "LAB STAND-IN"

# vllm/benchmarks/lib/endpoint_request_func.py ASYNC_REQUEST_FUNCS (names accepted by --backend).
BACKENDS = ["vllm", "openai", "openai-chat", "openai-responses", "openai-audio", "openai-embeddings",
            "openai-embeddings-chat", "openai-embeddings-clip", "openai-embeddings-vlm2vec",
            "infinity-embeddings", "infinity-embeddings-clip", "vllm-pooling", "vllm-rerank"]
SIMULATED_BACKENDS = {"vllm": "completions", "openai": "completions", "openai-chat": "chat/completions"}
# vllm/benchmarks/datasets/datasets.py add_dataset_parser --dataset-name choices.
DATASETS = ["sharegpt", "burstgpt", "random", "random-mm", "random-rerank", "hf", "custom", "custom_audio",
            "custom_image", "prefix_repetition", "spec_bench", "speed_bench", "timed_trace"]
DEFAULT_NUM_PROMPTS = 1000
VOCAB = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar "
         "papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu spark node link ring "
         "tensor pipeline cache token model layer head shard rank").split()


class StandInError(Exception):
    """A usage error the real tool reports with a ValueError."""


def build_parser():
    p = argparse.ArgumentParser(prog="vllm bench serve", allow_abbrev=False,
                                description=f"{MARK}: vLLM {VLLM_VERSION}'s `vllm bench serve` flags, "
                                            "a stdlib load generator (spark-cluster lab).")
    # add_dataset_parser
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-prompts", type=int, default=DEFAULT_NUM_PROMPTS)
    p.add_argument("--dataset-name", type=str, default="random", choices=DATASETS)
    p.add_argument("--dataset-path", type=str, default=None)
    p.add_argument("--no-stream", action="store_true")
    p.add_argument("--no-oversample", action="store_true")
    p.add_argument("--skip-chat-template", action="store_true")
    p.add_argument("--disable-shuffle", action="store_true")
    p.add_argument("--random-input-len", type=int, default=1024)
    p.add_argument("--random-output-len", type=int, default=128)
    p.add_argument("--random-range-ratio", type=str, default="0.0")
    p.add_argument("--random-prefix-len", type=int, default=0)
    # add_cli_args
    p.add_argument("--label", type=str, default=None)
    p.add_argument("--backend", type=str, default="openai", choices=BACKENDS)
    p.add_argument("--base-url", type=str, default=None)
    p.add_argument("--host", type=str, default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--endpoint", type=str, default="/v1/completions")
    p.add_argument("--header", metavar="KEY=VALUE", nargs="*")
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--model", type=str, default=None)
    p.add_argument("--input-len", type=int, default=None)
    p.add_argument("--output-len", type=int, default=None)
    p.add_argument("--tokenizer", type=str, default=None)
    p.add_argument("--tokenizer-mode", type=str, default="auto")
    p.add_argument("--logprobs", type=int, default=None)
    p.add_argument("--request-rate", type=float, default=float("inf"))
    p.add_argument("--burstiness", type=float, default=1.0)
    p.add_argument("--disable-tqdm", action="store_true")
    p.add_argument("--num-warmups", type=int, default=0)
    p.add_argument("--save-result", action="store_true")
    p.add_argument("--save-detailed", action="store_true")
    p.add_argument("--metadata", metavar="KEY=VALUE", nargs="*")
    p.add_argument("--result-dir", type=str, default=None)
    p.add_argument("--result-filename", type=str, default=None)
    p.add_argument("--ignore-eos", action="store_true")
    p.add_argument("--percentile-metrics", type=str, default=None)
    p.add_argument("--metric-percentiles", type=str, default="99")
    p.add_argument("--request-id-prefix", type=str, default=f"bench-{uuid.uuid4().hex[:8]}-")
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--served-model-name", type=str, default=None)
    p.add_argument("--ready-check-timeout-sec", type=int, default=0)
    p.add_argument("--skip-tokenizer-init", action="store_true")
    p.add_argument("--insecure", action="store_true")
    return p


def normalize_argv(argv):
    """vLLM's FlexibleArgumentParser takes --snake_case spellings too."""
    out = []
    for arg in argv:
        if arg.startswith("--") and "_" in arg.split("=", 1)[0]:
            name, eq, value = arg.partition("=")
            arg = name.replace("_", "-") + eq + value
        out.append(arg)
    return out


# --- statistics, as numpy computes them (np.percentile's default linear interpolation) ------------
def mean(xs):
    return sum(xs) / len(xs) if xs else 0.0


def percentile(xs, p):
    if not xs:
        return 0.0
    s = sorted(xs)
    k = (len(s) - 1) * p / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def std(xs):
    if not xs:
        return 0.0
    m = mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


# --- dataset ------------------------------------------------------------------------------------
def range_ratios(text):
    text = text.strip()
    if text.startswith("{"):
        d = json.loads(text)
        return float(d.get("input", 0.0)), float(d.get("output", 0.0))
    r = float(text)
    return r, r


def random_requests(args, rng):
    """--dataset-name random: prompts of random_input_len 'tokens' (words here), output lengths
    sampled in [len*(1-r), len*(1+r)] like RandomDataset."""
    in_len = args.input_len if args.input_len is not None else args.random_input_len
    out_len = args.output_len if args.output_len is not None else args.random_output_len
    rin, rout = range_ratios(args.random_range_ratio)
    if not (0 <= rin < 1 and 0 <= rout < 1):
        raise StandInError("random_range_ratio must be in [0, 1).")
    prefix = [rng.choice(VOCAB) for _ in range(args.random_prefix_len)]
    reqs = []
    for i in range(args.num_prompts):
        n_in = rng.randint(int(in_len * (1 - rin)), int(in_len * (1 + rin))) if rin else in_len
        n_out = rng.randint(max(1, int(out_len * (1 - rout))), int(out_len * (1 + rout))) if rout else out_len
        words = prefix + [rng.choice(VOCAB) for _ in range(max(0, n_in))]
        reqs.append({"prompt": " ".join(words), "prompt_len": len(words), "output_len": n_out,
                     "request_id": f"{args.request_id_prefix}{i}"})
    return reqs


# --- one request ----------------------------------------------------------------------------------
def headers_for(args, request_id):
    headers = {"Content-Type": "application/json"}
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    for item in args.header or []:
        k, _, v = item.partition("=")
        headers[k.strip()] = v.strip()
    if request_id:
        headers["x-request-id"] = request_id
    return headers


def payload_for(args, req, model_name, chat):
    body = {"model": model_name, "max_tokens": req["output_len"], "stream": True,
            "stream_options": {"include_usage": True}}
    if chat:
        body["messages"] = [{"role": "user", "content": [{"type": "text", "text": req["prompt"]}]}]
        body["max_completion_tokens"] = body.pop("max_tokens")
    else:
        body.update(prompt=req["prompt"], repetition_penalty=1.0, logprobs=args.logprobs)
    if args.ignore_eos:
        body["ignore_eos"] = True
    for key in ("temperature", "top_p", "top_k"):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)
    return body


def chat_has_output(delta):
    """endpoint_request_func.py _choice_has_streamed_output()."""
    if not isinstance(delta, dict):
        return False
    if delta.get("content") or delta.get("reasoning") or delta.get("tool_calls") or delta.get("function_call"):
        return True
    return delta.get("content") == "" and "role" not in delta


def send(api_url, args, req, model_name, chat, timeout):
    out = {"success": False, "ttft": 0.0, "itl": [], "latency": 0.0, "prompt_len": req["prompt_len"],
           "output_tokens": None, "chunks": 0, "generated_text": "", "error": "", "start_time": 0.0}
    data = json.dumps(payload_for(args, req, model_name, chat)).encode()
    http = urllib.request.Request(api_url, data=data, headers=headers_for(args, req["request_id"]), method="POST")
    st = time.perf_counter()
    out["start_time"] = st
    last = st
    try:
        with urllib.request.urlopen(http, timeout=timeout) as resp:
            for raw in resp:
                line = raw.decode("utf-8", "replace").strip()
                if not line or line.startswith(":"):
                    continue
                chunk = line[len("data:"):].strip() if line.startswith("data:") else line
                if chunk == "[DONE]":
                    break
                msg = json.loads(chunk)
                choices = msg.get("choices")
                if choices:
                    c = choices[0]
                    if chat and not chat_has_output(c.get("delta")):
                        continue  # the role-only opening chunk and the closing one carry no token
                    text = (c.get("delta") or {}).get("content") if chat else c.get("text")
                    now = time.perf_counter()
                    if out["chunks"] == 0:
                        out["ttft"] = now - st
                    else:
                        out["itl"].append(now - last)
                    last = now
                    out["chunks"] += 1
                    out["generated_text"] += text or ""
                elif msg.get("usage"):
                    out["output_tokens"] = msg["usage"].get("completion_tokens")
                    if msg["usage"].get("prompt_tokens") is not None:
                        out["prompt_len"] = msg["usage"]["prompt_tokens"]
        if out["chunks"]:
            out["success"] = True
        else:
            out["error"] = ("Never received a valid chunk to calculate TTFT."
                            "This response will be marked as failed!")
        out["latency"] = last - st
    except urllib.error.HTTPError as exc:
        out["error"] = f"{exc.code} {exc.reason}"
    except Exception as exc:  # noqa: BLE001 - every failure is a failed request, as in vLLM
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


# --- the run ----------------------------------------------------------------------------------------
def first_model(base_url, args):
    http = urllib.request.Request(base_url + "/v1/models", headers=headers_for(args, None))
    with urllib.request.urlopen(http, timeout=30) as resp:
        data = json.load(resp)["data"][0]
    return data.get("root") or data["id"], data["id"]


def arrival_delays(n, rate, burstiness, rng):
    """get_request(): all at once for inf, else gamma(shape=burstiness, scale=1/(rate*burstiness))."""
    if math.isinf(rate):
        return [0.0] * n
    theta = 1.0 / (rate * burstiness)
    t, out = 0.0, []
    for _ in range(n):
        out.append(t)
        t += rng.gammavariate(burstiness, theta)
    return out


def run(args):
    if args.max_concurrency is not None and args.max_concurrency <= 0:
        raise StandInError("--max-concurrency must be greater than 0")
    if args.dataset_name != "random":
        raise StandInError(f"{MARK}: only --dataset-name random is simulated (got {args.dataset_name})")
    if args.backend not in SIMULATED_BACKENDS:
        raise StandInError(f"{MARK}: --backend {args.backend} is not simulated (openai, vllm, openai-chat are)")
    if args.dataset_path is not None:
        raise StandInError("Dataset path is not supported for random dataset.")
    suffix = SIMULATED_BACKENDS[args.backend]
    chat = suffix == "chat/completions"
    if args.base_url is not None:
        base_url = args.base_url
    else:
        host = f"[{args.host}]" if ":" in args.host else args.host
        base_url = f"http://{host}:{args.port}"
    api_url = base_url + args.endpoint
    if not api_url.endswith(suffix):
        api = "OpenAI Chat Completions API" if chat else "OpenAI Completions API"
        raise StandInError(f"{api} URL must end with one of: {{{suffix!r}}}.")

    rng = random.Random(args.seed)
    if args.model is None:
        print("Model not specified, fetching first model from server...")
        model_name, model_id = first_model(base_url, args)
        print(f"First model name: {model_name}, first model id: {model_id}")
    else:
        model_name, model_id = args.served_model_name, args.model
    name_in_requests = model_name or model_id
    reqs = random_requests(args, rng)
    if not reqs:
        raise StandInError("--num-prompts must be at least 1")
    timeout = float(os.environ.get("LAB_BENCH_REQUEST_TIMEOUT_S", "600"))

    print("Starting initial single prompt test run...")
    if args.ready_check_timeout_sec > 0:
        deadline = time.monotonic() + args.ready_check_timeout_sec
        while True:
            test = send(api_url, args, reqs[0], name_in_requests, chat, timeout)
            if test["success"] or time.monotonic() > deadline:
                break
            time.sleep(5)
        if not test["success"]:
            raise StandInError("Initial test run failed - Please make sure benchmark arguments are correctly "
                               f"specified. Error: {test['error']}")
        print("Initial test run completed.")
    else:
        print("Skipping endpoint ready check.")
    if args.num_warmups > 0:
        print(f"Warming up with {args.num_warmups} requests...")
        for _ in range(args.num_warmups):
            send(api_url, args, reqs[0], name_in_requests, chat, timeout)
        print("Warmup run completed.")

    print("Starting main benchmark run...")
    distribution = "Poisson process" if args.burstiness == 1.0 else "Gamma distribution"
    print(f"Traffic request rate: {args.request_rate}")
    print(f"Burstiness factor: {args.burstiness} ({distribution})")
    print(f"Maximum request concurrency: {args.max_concurrency}")
    sys.stdout.flush()

    delays = arrival_delays(len(reqs), args.request_rate, args.burstiness, rng)
    gate = threading.BoundedSemaphore(args.max_concurrency) if args.max_concurrency else None
    outputs = [None] * len(reqs)
    done = [0]
    lock = threading.Lock()
    step = max(1, len(reqs) // 10)

    def worker(i):
        if gate:
            gate.acquire()
        try:
            outputs[i] = send(api_url, args, reqs[i], name_in_requests, chat, timeout)
        finally:
            if gate:
                gate.release()
        with lock:
            done[0] += 1
            if not args.disable_tqdm and (done[0] % step == 0 or done[0] == len(reqs)):
                print(f"{MARK} progress: {done[0]}/{len(reqs)} requests", file=sys.stderr, flush=True)

    threads = []
    t0 = time.perf_counter()
    for i, delay in enumerate(delays):
        wait = t0 + delay - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        th = threading.Thread(target=worker, args=(i,), daemon=True)
        th.start()
        threads.append(th)
    for th in threads:
        th.join()
    duration = time.perf_counter() - t0
    return report(args, outputs, duration, model_id, base_url)


def report(args, outputs, duration, model_id, base_url):
    percentiles = [float(p) for p in args.metric_percentiles.split(",")]
    selected = (args.percentile_metrics or "ttft,tpot,itl").split(",")
    ok = [o for o in outputs if o["success"]]
    failed = [o for o in outputs if not o["success"]]
    out_lens, ttfts, tpots, itls, e2els = [], [], [], [], []
    total_input = 0
    for o in outputs:
        if not o["success"]:
            out_lens.append(0)
            continue
        n = o["output_tokens"] or o["chunks"] or 1
        out_lens.append(n)
        total_input += o["prompt_len"]
        if n > 1:
            tpots.append((o["latency"] - o["ttft"]) / (n - 1))
        itls += o["itl"]
        ttfts.append(o["ttft"])
        e2els.append(o["latency"])
    if failed:
        print("Failed requests during benchmark run detected (capping to 10):")
        for i, o in enumerate(failed[:10]):
            print(f"Error {i}: {o['error']}")
    peak_tokens, peak_concurrent = 0.0, 0
    if ok:
        t_min = min(o["start_time"] for o in ok)
        t_max = max(o["start_time"] + o["latency"] for o in ok)
        seconds = int(math.ceil(t_max - t_min)) + 1
        tokens, concurrent = [0] * seconds, [0] * seconds
        for o in ok:
            times = [o["start_time"] + o["ttft"]]
            for gap in o["itl"]:
                times.append(times[-1] + gap)
            for t in times:
                b = int(t - t_min)
                if 0 <= b < seconds:
                    tokens[b] += 1
            for s in range(int(o["start_time"] - t_min), int(o["start_time"] + o["latency"] - t_min) + 1):
                concurrent[s] += 1
        peak_tokens, peak_concurrent = float(max(tokens)), max(concurrent)
    total_output = sum(out_lens)
    completed = len(ok)
    result = {"lab_standin": True, "backend": args.backend, "model_id": model_id, "base_url": base_url,
              "duration": duration, "completed": completed, "failed": len(failed),
              "total_input_tokens": total_input, "total_output_tokens": total_output,
              "request_throughput": completed / duration, "output_throughput": total_output / duration,
              "total_token_throughput": (total_input + total_output) / duration,
              "max_output_tokens_per_s": peak_tokens, "max_concurrent_requests": peak_concurrent}

    def row(label, value, fmt="{:<10}"):
        print(("{:<40} " + fmt).format(label, value))

    print("{s:{c}^{n}}".format(s=f" Serving Benchmark Result ({MARK}) ", n=50, c="="))
    row("Successful requests:", completed)
    row("Failed requests:", len(failed))
    if args.max_concurrency is not None:
        row("Maximum request concurrency:", args.max_concurrency)
    if args.request_rate != float("inf"):
        row("Request rate configured (RPS):", args.request_rate, "{:<10.2f}")
    row("Benchmark duration (s):", duration, "{:<10.2f}")
    row("Total input tokens:", total_input)
    row("Total generated tokens:", total_output)
    row("Request throughput (req/s):", completed / duration, "{:<10.2f}")
    row("Output token throughput (tok/s):", total_output / duration, "{:<10.2f}")
    row("Peak output token throughput (tok/s):", peak_tokens, "{:<10.2f}")
    row("Peak concurrent requests:", float(peak_concurrent), "{:<10.2f}")
    row("Total token throughput (tok/s):", (total_input + total_output) / duration, "{:<10.2f}")
    for key, name, header, values in (("ttft", "TTFT", "Time to First Token", ttfts),
                                      ("tpot", "TPOT", "Time per Output Token (excl. 1st token)", tpots),
                                      ("itl", "ITL", "Inter-token Latency", itls),
                                      ("e2el", "E2EL", "End-to-end Latency", e2els)):
        if key not in selected:
            continue
        print("{s:{c}^{n}}".format(s=header, n=50, c="-"))
        row(f"Mean {name} (ms):", mean(values) * 1000, "{:<10.2f}")
        row(f"Median {name} (ms):", percentile(values, 50) * 1000, "{:<10.2f}")
        result[f"mean_{key}_ms"] = mean(values) * 1000
        result[f"median_{key}_ms"] = percentile(values, 50) * 1000
        result[f"std_{key}_ms"] = std(values) * 1000
        for p in percentiles:
            word = str(int(p)) if int(p) == p else str(p)
            row(f"P{word} {name} (ms):", percentile(values, p) * 1000, "{:<10.2f}")
            result[f"p{word}_{key}_ms"] = percentile(values, p) * 1000
    print("=" * 50)
    print(f"{MARK}: no tokenizer; tokens are the lab server's words (usage.completion_tokens) and the "
          f"prompts' words. Not vLLM's numbers.")
    if args.save_result:
        label = args.label or args.backend
        rate = "inf" if math.isinf(args.request_rate) else args.request_rate
        name = args.result_filename or (f"{label}-{rate}qps-{model_id.split('/')[-1]}-"
                                        f"{time.strftime('%Y%m%d-%H%M%S')}.json")
        path = os.path.join(args.result_dir, name) if args.result_dir else name
        if args.result_dir:
            os.makedirs(args.result_dir, exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2)
    sys.stdout.flush()
    return result


def main(argv):
    """`vllm bench serve ARGS` (argv without `bench serve`); returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(normalize_argv(argv))
    print(f"{MARK}: vllm bench serve (vLLM {VLLM_VERSION} flags; a stdlib load generator, not vLLM)")
    shown = argparse.Namespace(**vars(args))
    if shown.header is not None:
        shown.header = "***"
    print(shown)
    try:
        run(args)
    except StandInError as exc:
        print(f"ValueError: {exc}", file=sys.stderr)
        return 1
    except urllib.error.URLError as exc:
        print(f"{MARK}: cannot reach the server: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
