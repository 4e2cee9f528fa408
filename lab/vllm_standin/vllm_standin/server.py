"""OpenAI-compatible HTTP API of the vLLM LAB STAND-IN (stdlib only, threading server).

GET /health, GET /version, GET /v1/models, POST /v1/completions, POST /v1/chat/completions
(stream: true -> SSE `data: {...}` chunks ending with `data: [DONE]`), GET /metrics.
With --api-key, every /v1 route needs `Authorization: Bearer <key>` (401 otherwise), as in vLLM.

Engine death (see cli.py's docstring for the vLLM 0.33 source it follows): a watchdog thread
probes the shards every LAB_VLLM_SHARD_PING_S; once one is lost /health answers 503, requests
answer 500, and at the next watchdog tick (VLLM_WATCHDOG_TIME_S = 5 s) the server shuts down and
the process exits with LAB_VLLM_ENGINE_DEAD_EXIT (default 1), unless
VLLM_KEEP_ALIVE_ON_ENGINE_DEATH=1, which keeps it answering 503/500.
"""

import dataclasses
import hmac
import json
import logging
import os
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import __version__

logger = logging.getLogger("vllm.entrypoints.openai.api_server")


@dataclasses.dataclass
class ServerConfig:
    model: str
    model_dir: str
    served_names: list
    api_keys: list
    shards: object
    max_model_len: object
    host: str
    port: int


class Metrics:
    def __init__(self):
        self.lock = threading.Lock()
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.success = 0
        self.running = 0

    def render(self, name, shards):
        with self.lock:
            lines = [
                "# HELP vllm:num_requests_running Number of requests in model execution batches.",
                "# TYPE vllm:num_requests_running gauge",
                f'vllm:num_requests_running{{model_name="{name}"}} {float(self.running)}',
                "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
                "# TYPE vllm:num_requests_waiting gauge",
                f'vllm:num_requests_waiting{{model_name="{name}"}} 0.0',
                "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
                "# TYPE vllm:kv_cache_usage_perc gauge",
                f'vllm:kv_cache_usage_perc{{model_name="{name}"}} 0.0',
                "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
                "# TYPE vllm:prompt_tokens_total counter",
                f'vllm:prompt_tokens_total{{model_name="{name}"}} {float(self.prompt_tokens)}',
                "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
                "# TYPE vllm:generation_tokens_total counter",
                f'vllm:generation_tokens_total{{model_name="{name}"}} {float(self.generation_tokens)}',
                "# HELP vllm:request_success_total Count of successfully processed requests.",
                "# TYPE vllm:request_success_total counter",
                f'vllm:request_success_total{{finished_reason="stop",model_name="{name}"}} {float(self.success)}',
                "# HELP lab_standin_info LAB STAND-IN: where the shards of the served model live.",
                "# TYPE lab_standin_info gauge",
                f'lab_standin_info{{model_name="{name}",shards="{",".join(shards.hosts)}",'
                f'tensor_parallel_size="{shards.tp}",pipeline_parallel_size="{shards.pp}",'
                f'executor="{shards.backend}"}} 1.0',
            ]
        return "\n".join(lines) + "\n"


ENGINE_DEAD_CLIENT_MESSAGE = "The server had an error while processing your request."
VLLM_WATCHDOG_TIME_S = 5.0


class EngineState:
    def __init__(self):
        self.dead = None          # why the engine died, once it has
        self.lock = threading.Lock()

    def kill(self, why):
        with self.lock:
            if self.dead is None:
                self.dead = why
                logger.error("EngineCore encountered an issue: %s. The engine is dead; /health answers 503 "
                             "and requests fail from now on.", why)


def _tokens(text):
    return max(1, len(text.split()))


def make_handler(cfg, metrics, state):
    primary = cfg.served_names[0]
    created = int(time.time())

    class Handler(BaseHTTPRequestHandler):
        server_version = "uvicorn"
        sys_version = ""

        def log_message(self, fmt, *args):
            logger.info("%s - %s", self.client_address[0], fmt % args)

        def _json(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _error(self, code, message, typ):
            self._json(code, {"error": {"message": message, "type": typ, "param": None, "code": code}})

        def _authorized(self):
            if not cfg.api_keys or not self.path.startswith("/v1"):
                return True
            got = self.headers.get("Authorization", "")
            for key in cfg.api_keys:
                if hmac.compare_digest(got.encode(), f"Bearer {key}".encode()):
                    return True
            self._json(401, {"error": "Unauthorized"})
            return False

        def do_GET(self):  # noqa: N802
            if not self._authorized():
                return
            path = self.path.split("?", 1)[0]
            if path in ("/health", "/ping"):
                self.send_response(200 if state.dead is None else 503)
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif path == "/version":
                self._json(200, {"version": __version__})
            elif path == "/v1/models":
                self._json(200, {"object": "list", "data": [
                    {"id": n, "object": "model", "created": created, "owned_by": "vllm", "root": cfg.model,
                     "parent": None, "max_model_len": int(cfg.max_model_len) if str(cfg.max_model_len or "").isdigit() else 131072,
                     "permission": []}
                    for n in cfg.served_names]})
            elif path == "/metrics":
                body = metrics.render(primary, cfg.shards).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                self._json(404, {"detail": "Not Found"})

        def do_POST(self):  # noqa: N802
            if not self._authorized():
                return
            path = self.path.split("?", 1)[0]
            if path not in ("/v1/chat/completions", "/v1/completions"):
                self._json(404, {"detail": "Not Found"})
                return
            try:
                length = int(self.headers.get("Content-Length", "0"))
                req = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self._error(400, "Invalid JSON body", "BadRequestError")
                return
            name = req.get("model") or primary
            if name not in cfg.served_names:
                self._error(404, f"The model `{name}` does not exist.", "NotFoundError")
                return
            chat = path.endswith("chat/completions")
            if chat:
                msgs = req.get("messages")
                if not isinstance(msgs, list) or not msgs:
                    self._error(400, "messages must be a non-empty list", "BadRequestError")
                    return
                prompt = " ".join(str(m.get("content", "")) for m in msgs if isinstance(m, dict))
                last = str(msgs[-1].get("content", "")) if isinstance(msgs[-1], dict) else ""
            else:
                prompt = req.get("prompt")
                if isinstance(prompt, list):
                    prompt = " ".join(str(p) for p in prompt)
                if not isinstance(prompt, str):
                    self._error(400, "prompt is required", "BadRequestError")
                    return
                last = prompt
            if state.dead is not None:
                self._error(500, ENGINE_DEAD_CLIENT_MESSAGE, "InternalServerError")
                return
            with metrics.lock:
                metrics.running += 1
            try:
                cfg.shards.step()
            except Exception as exc:  # a shard died: the engine is dead, as in vLLM
                with metrics.lock:
                    metrics.running -= 1
                state.kill(str(exc) or type(exc).__name__)
                self._error(500, ENGINE_DEAD_CLIENT_MESSAGE, "InternalServerError")
                return
            s = cfg.shards
            text = (f"LAB STAND-IN {name}: served by {','.join(s.hosts)} (tp={s.tp} pp={s.pp} "
                    f"executor={s.backend}). You said: {last[:200]}")
            ptoks, ctoks = _tokens(prompt), _tokens(text)
            with metrics.lock:
                metrics.running -= 1
                metrics.success += 1
                metrics.prompt_tokens += ptoks
                metrics.generation_tokens += ctoks
            rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
            usage = {"prompt_tokens": ptoks, "completion_tokens": ctoks, "total_tokens": ptoks + ctoks}
            now = int(time.time())
            if req.get("stream"):
                self._stream(rid, name, now, chat, text, usage, bool((req.get("stream_options") or {}).get("include_usage")))
                return
            if chat:
                choice = {"index": 0, "message": {"role": "assistant", "content": text, "tool_calls": []},
                          "logprobs": None, "finish_reason": "stop", "stop_reason": None}
                obj = "chat.completion"
            else:
                choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "stop", "stop_reason": None}
                obj = "text_completion"
            self._json(200, {"id": rid, "object": obj, "created": now, "model": name, "choices": [choice],
                             "usage": usage})

        def _stream(self, rid, name, now, chat, text, usage, include_usage):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            obj = "chat.completion.chunk" if chat else "text_completion"

            def send(payload):
                self.wfile.write(b"data: " + payload.encode() + b"\n\n")
                self.wfile.flush()

            def chunk(delta=None, finish=None, text_piece=None, usage_obj=None):
                if chat:
                    choices = [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}]
                else:
                    choices = [{"index": 0, "text": text_piece or "", "logprobs": None, "finish_reason": finish}]
                body = {"id": rid, "object": obj, "created": now, "model": name, "choices": choices}
                if usage_obj is not None:
                    body = {"id": rid, "object": obj, "created": now, "model": name, "choices": [], "usage": usage_obj}
                send(json.dumps(body))

            if chat:
                chunk(delta={"role": "assistant", "content": ""})
            words = text.split(" ")
            for i, w in enumerate(words):
                piece = w if i == 0 else " " + w
                if chat:
                    chunk(delta={"content": piece})
                else:
                    chunk(text_piece=piece)
                time.sleep(0.005)
            chunk(delta={}, finish="stop")
            if include_usage:
                chunk(usage_obj=usage)
            send("[DONE]")

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def run_server(cfg, stop):
    """Serve until STOP is set (exit status 0) or the engine dies (LAB_VLLM_ENGINE_DEAD_EXIT, unless
    VLLM_KEEP_ALIVE_ON_ENGINE_DEATH is set). Returns the process's exit status."""
    metrics = Metrics()
    state = EngineState()
    httpd = _Server((cfg.host, cfg.port), make_handler(cfg, metrics, state))
    t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    t.start()
    logger.info("Starting vLLM API server 0 on http://%s:%d", cfg.host, cfg.port)
    logger.info("Serving %s as %s; shards on %s (tp=%d pp=%d executor=%s)", cfg.model, cfg.served_names,
                ",".join(cfg.shards.hosts), cfg.shards.tp, cfg.shards.pp, cfg.shards.backend)
    logger.info("Application startup complete.")

    ping_s = max(0.2, float(os.environ.get("LAB_VLLM_SHARD_PING_S", "1")))

    def shard_watchdog():
        while state.dead is None and not stop.is_set():
            try:
                cfg.shards.check()
            except Exception as exc:
                state.kill(str(exc) or type(exc).__name__)
                return
            stop.wait(ping_s)

    threading.Thread(target=shard_watchdog, daemon=True, name="lab-shard-watchdog").start()
    keep_alive = os.environ.get("VLLM_KEEP_ALIVE_ON_ENGINE_DEATH", "0") not in ("", "0")
    dead_exit = int(os.environ.get("LAB_VLLM_ENGINE_DEAD_EXIT", "1"))
    status = 0
    while not stop.wait(VLLM_WATCHDOG_TIME_S):
        if state.dead is not None and not keep_alive:
            logger.info("[shutdown] API server: engine is dead (%s); shutting down FastAPI HTTP server "
                        "(VLLM_KEEP_ALIVE_ON_ENGINE_DEATH is not set)", state.dead)
            status = dead_exit
            break
    httpd.shutdown()
    httpd.server_close()
    return status
