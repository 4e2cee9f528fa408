"""LAB STAND-IN for `python3 -m sglang.launch_server` / `sglang serve` of SGLang 0.5.23 (not SGLang).

What it follows, at the edges the product can notice (file:line of the sglang 0.5.23 wheel):

* Arguments: flags.py (the generated table; argparse errors, exit 2).
* Multi-node start-up (entrypoints/engine.py, distributed/bootstrap.py): every node runs the same
  command with its own --node-rank. The processes rendezvous at --dist-init-addr HOST:PORT, a
  torch.distributed `tcp://` init (bootstrap.py:241 _resolve_dist_init_method): rank 0 listens on
  PORT on every interface (torch's TCPStore server), the other ranks connect to it. Here the
  rendezvous is a small line protocol over that same TCP port, so the firewall sees the same
  traffic shape: one connection per follower rank to the head's dist-init port.
  - --nnodes > 1 without --dist-init-addr: the ranks cannot meet; refused (engine.py:751's wording).
  - The head unreachable: a follower retries until the init timeout (--dist-timeout, else torch's
    NCCL default of 600 s; LAB_SGLANG_DIST_TIMEOUT_S overrides it for tests), then fails as
    torch's TCPStore client does (DistNetworkError ... timed out ... trying to connect to (HOST,
    PORT)) and the process exits 1.
  - A follower missing: rank 0 waits as long, then DistStoreError "Timed out after N seconds
    waiting for clients. k/n clients joined." and exits 1.
  - The dist-init port taken on the head: DistNetworkError ... EADDRINUSE, exit 1.
* Serving (engine.py:1234, http_server.py:3163): only rank 0 runs the tokenizer and the HTTP API
  at --host/--port. Ranks >= 1 run launch_dummy_health_check_server(host, port)
  (utils/common.py:3624): /ping, /health, /health_generate answer 200, anything else 404.
* SIGTERM: rank 0 shuts down; a rank >= 1 only logs it and waits for rank 0's shutdown (or the
  supervisor's kill timeout: systemd's TimeoutStopSec), engine.py:1262.
* A rank dying after start-up: the survivors' collectives fail, the failing scheduler child
  SIGQUITs its launcher, whose launch_phase_sigquit_handler logs "Received sigquit from a child
  process. It usually means the child failed." and kill_process_tree(os.getpid()) SIGKILLs the
  whole tree, launcher included (engine.py:1976, utils/common.py:2507). Here: a watchdog pings
  every peer each LAB_SGLANG_PING_S (1 s); a lost peer -> that log line, then SIGKILL to itself.
* HTTP API of rank 0 (entrypoints/http_server.py, utils/auth.py): GET /v1/models,
  POST /v1/chat/completions, /health, /health_generate, /ping. With --api-key every route but
  /health*, /ready*, /metrics* needs `Authorization: Bearer KEY` (secrets.compare_digest), else
  401 {"error": "Unauthorized"} (auth.py:98-205).

The answer names every node that took part: "LAB STAND-IN <model>: served by node-a,node-b
(sglang tp=2 nnodes=2). You said: ...", each follower answering a per-request step over its
rendezvous connection.
"""

import hmac
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import __version__
from .flags import build_parser, load_table, merge_config

logger = logging.getLogger("sglang.launch_server")
TORCH_NCCL_DEFAULT_TIMEOUT_S = 600      # torch.distributed default_pg_nccl_timeout (10 min)


def _die_with_tree():
    """kill_process_tree(os.getpid()): SIGKILL, launcher included."""
    logger.error("Received sigquit from a child process. It usually means the child failed.")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


class Peer:
    """One follower rank's rendezvous connection, as seen from rank 0."""

    def __init__(self, sock, hello):
        self.sock = sock
        self.rfile = sock.makefile("r", encoding="utf-8")
        self.rank = hello["rank"]
        self.host = hello["host"]
        self.lock = threading.Lock()

    def call(self, msg, timeout=10.0):
        with self.lock:
            self.sock.settimeout(timeout)
            self.sock.sendall((json.dumps(msg) + "\n").encode())
            line = self.rfile.readline()
            if not line:
                raise ConnectionError(f"node rank {self.rank} ({self.host}) closed its connection")
            return json.loads(line)


def _split_addr(addr):
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"Invalid address {addr!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


def rendezvous_head(args, timeout):
    host, port = _split_addr(args.dist_init_addr)
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        srv.bind(("0.0.0.0", port))
    except OSError as exc:
        raise SystemExit(f"torch.distributed.DistNetworkError: The server socket has failed to listen on any "
                         f"local network address. port: {port}, useIpv6: 0, code: -{exc.errno}, "
                         f"name: EADDRINUSE, message: address already in use") from None
    srv.listen(16)
    logger.info("Init torch distribution begin. dist_init_method=tcp://%s:%d world_size(nodes)=%d",
                host, port, args.nnodes)
    peers = {}
    deadline = time.monotonic() + timeout
    while len(peers) < args.nnodes - 1:
        left = deadline - time.monotonic()
        if left <= 0:
            raise SystemExit(f"torch.distributed.DistStoreError: Timed out after {int(timeout) + 1} seconds waiting "
                             f"for clients. {len(peers) + 1}/{args.nnodes} clients joined.")
        srv.settimeout(min(left, 1.0))
        try:
            conn, _ = srv.accept()
        except socket.timeout:
            continue
        conn.settimeout(10)
        try:
            hello = json.loads(conn.makefile("r", encoding="utf-8").readline() or "{}")
        except (ValueError, OSError):
            conn.close()
            continue
        problem = None
        if hello.get("nnodes") != args.nnodes or hello.get("tp") != args.tp_size:
            problem = (f"node rank {hello.get('rank')} was started with nnodes={hello.get('nnodes')} "
                       f"tp_size={hello.get('tp')}, rank 0 with nnodes={args.nnodes} tp_size={args.tp_size}")
        elif not isinstance(hello.get("rank"), int) or not 1 <= hello["rank"] < args.nnodes or hello["rank"] in peers:
            problem = f"node rank {hello.get('rank')} is not a free rank of 1..{args.nnodes - 1}"
        if problem:
            conn.sendall((json.dumps({"error": problem}) + "\n").encode())
            conn.close()
            logger.error("rendezvous: %s", problem)
            continue
        peers[hello["rank"]] = Peer(conn, hello)
        logger.info("node rank %d (%s) joined", hello["rank"], hello["host"])
    # torch's TCPStore server stays up for the life of the process group: the port keeps listening
    # (followers' watchdogs, ours included, check that it answers). A late connection (a rank
    # restarted into a running engine) is held open unanswered, as the store's barrier would hold
    # it, until the joiner's own timeout.
    srv.settimeout(None)
    late = []

    def keep_listening():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            late.append(conn)
            logger.warning("dist-init: a connection after start-up from %s is held (the engine is running)",
                           conn.getpeername()[0])

    threading.Thread(target=keep_listening, daemon=True, name="dist-init-store").start()
    hosts = [socket.gethostname()] + [peers[r].host for r in sorted(peers)]
    for p in peers.values():
        p.call({"ready": hosts})
    return [peers[r] for r in sorted(peers)], hosts


def rendezvous_follower(args, timeout):
    host, port = _split_addr(args.dist_init_addr)
    deadline = time.monotonic() + timeout
    logger.info("Init torch distribution begin. dist_init_method=tcp://%s:%d node_rank=%d", host, port, args.node_rank)
    while True:
        try:
            sock = socket.create_connection((host, port), timeout=min(5.0, max(0.5, deadline - time.monotonic())))
            break
        except OSError:
            if time.monotonic() >= deadline:
                raise SystemExit(f"torch.distributed.DistNetworkError: The client socket has timed out after "
                                 f"{int(timeout * 1000)}ms while trying to connect to ({host}, {port}).") from None
            time.sleep(0.5)
    sock.settimeout(None)
    sock.sendall((json.dumps({"rank": args.node_rank, "nnodes": args.nnodes, "tp": args.tp_size,
                              "host": socket.gethostname()}) + "\n").encode())
    rfile = sock.makefile("r", encoding="utf-8")
    first = json.loads(rfile.readline() or '{"error": "rank 0 closed the rendezvous"}')
    if "error" in first:
        raise SystemExit(f"RuntimeError: rendezvous refused: {first['error']}")
    sock.sendall(b'{"ok": true}\n')
    return sock, rfile, first["ready"]


def follower_loop(sock, rfile):
    """Answer rank 0's steps and pings until it goes away (then die as SGLang does)."""
    for line in rfile:
        msg = json.loads(line)
        if msg.get("shutdown"):
            logger.info("ShutdownReq from rank 0: stopping the schedulers")
            sys.stdout.flush()
            os._exit(0)
        sock.sendall((json.dumps({"ok": True, "host": socket.gethostname(), "step": msg.get("step")}) + "\n").encode())
    logger.error("[NCCL] rank 0 is gone: the collective on the rendezvous connection failed")
    _die_with_tree()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def _json_response(handler, code, obj):
    body = json.dumps(obj).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def dummy_health_handler():
    class Handler(BaseHTTPRequestHandler):
        server_version = "uvicorn"
        sys_version = ""

        def log_message(self, fmt, *args):
            pass

        def do_GET(self):  # noqa: N802
            if self.path.split("?", 1)[0] in ("/ping", "/health", "/health_generate"):
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                _json_response(self, 404, {"detail": "Not Found"})

        do_POST = do_GET  # noqa: N815

    return Handler


def api_handler(args, served, hosts, peers):
    created = int(time.time())

    class Handler(BaseHTTPRequestHandler):
        server_version = "uvicorn"
        sys_version = ""

        def log_message(self, fmt, *args_):
            logger.info("%s - %s", self.client_address[0], fmt % args_)

        def _authorized(self):
            path = self.path.split("?", 1)[0]
            if not args.api_key or path.startswith(("/health", "/ready", "/metrics")):
                return True
            parts = self.headers.get("Authorization", "").split(" ", 1)
            if len(parts) == 2 and parts[0].lower() == "bearer" and hmac.compare_digest(parts[1], args.api_key):
                return True
            _json_response(self, 401, {"error": "Unauthorized"})
            return False

        def do_GET(self):  # noqa: N802
            if not self._authorized():
                return
            path = self.path.split("?", 1)[0]
            if path in ("/health", "/health_generate", "/ping"):
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif path == "/v1/models":
                _json_response(self, 200, {"object": "list", "data": [
                    {"id": served, "object": "model", "created": created, "owned_by": "sglang", "root": served,
                     "parent": None, "max_model_len": args.context_length or 32768}]})
            elif path == "/get_server_info" or path == "/server_info":
                _json_response(self, 200, {"version": __version__, "tp_size": args.tp_size, "nnodes": args.nnodes,
                                           "lab_standin": True, "hosts": hosts})
            else:
                _json_response(self, 404, {"detail": "Not Found"})

        def do_POST(self):  # noqa: N802
            if not self._authorized():
                return
            if self.path.split("?", 1)[0] != "/v1/chat/completions":
                _json_response(self, 404, {"detail": "Not Found"})
                return
            try:
                req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            except ValueError:
                _json_response(self, 400, {"object": "error", "message": "Invalid JSON body", "type": "BadRequestError",
                                           "param": None, "code": 400})
                return
            msgs = req.get("messages")
            if not isinstance(msgs, list) or not msgs:
                _json_response(self, 400, {"object": "error", "message": "messages must be a non-empty list",
                                           "type": "BadRequestError", "param": None, "code": 400})
                return
            step = uuid.uuid4().hex[:8]
            took_part = [socket.gethostname()]
            try:
                for p in peers:
                    took_part.append(p.call({"step": step})["host"])
            except (OSError, ValueError) as exc:
                _json_response(self, 500, {"object": "error", "message": f"scheduler step failed: {exc}",
                                           "type": "InternalServerError", "param": None, "code": 500})
                return
            last = msgs[-1].get("content", "") if isinstance(msgs[-1], dict) else ""
            text = (f"LAB STAND-IN {served}: served by {','.join(took_part)} (sglang tp={args.tp_size} "
                    f"nnodes={args.nnodes}). You said: {str(last)[:200]}")
            ptoks = sum(len(str(m.get("content", "")).split()) for m in msgs if isinstance(m, dict)) or 1
            ctoks = len(text.split())
            _json_response(self, 200, {
                "id": uuid.uuid4().hex, "object": "chat.completion", "created": int(time.time()), "model": served,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "reasoning_content": None,
                                                     "tool_calls": None},
                             "logprobs": None, "finish_reason": "stop", "matched_stop": None}],
                "usage": {"prompt_tokens": ptoks, "completion_tokens": ctoks, "total_tokens": ptoks + ctoks}})

    return Handler


def watchdog(peers, ping_s):
    while True:
        time.sleep(ping_s)
        for p in peers:
            try:
                p.call({"ping": True}, timeout=max(5.0, ping_s * 5))
            except (OSError, ValueError) as exc:
                logger.error("[NCCL] watchdog: node rank %d (%s) lost: %s", p.rank, p.host, exc)
                _die_with_tree()


def main(argv):
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(message)s", datefmt="%Y-%m-%d %H:%M:%S")
    print("LAB STAND-IN for SGLang " + __version__ + " (lab/sglang_standin), not SGLang", file=sys.stderr)
    table = load_table(__version__)
    parser = build_parser(table)
    try:
        argv = merge_config(parser, list(argv))
    except ValueError as exc:
        raise SystemExit(f"ValueError: {exc}") from None
    args = parser.parse_args(argv)
    if args.nnodes > 1 and not args.dist_init_addr:
        raise SystemExit("ValueError: Multi-node (nnodes > 1) requires --dist-init-addr so all nodes rendezvous "
                         "at the same endpoint.")
    if not 0 <= args.node_rank < args.nnodes:
        raise SystemExit(f"ValueError: --node-rank {args.node_rank} is not in 0..{args.nnodes - 1}")
    if (args.tp_size * args.pp_size) % args.nnodes:
        raise SystemExit(f"ValueError: tp_size * pp_size ({args.tp_size * args.pp_size}) must be divisible by "
                         f"nnodes ({args.nnodes})")
    model = args.model_path
    if model.startswith("/") and not os.path.isdir(model):
        raise SystemExit(f"OSError: {model} is not a local folder and is not a valid model identifier")
    served = args.served_model_name or model
    timeout = float(os.environ.get("LAB_SGLANG_DIST_TIMEOUT_S") or args.dist_timeout or TORCH_NCCL_DEFAULT_TIMEOUT_S)
    ping_s = max(0.2, float(os.environ.get("LAB_SGLANG_PING_S", "1")))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if args.nnodes > 1 and args.node_rank >= 1:
        # engine.py:1262-1271: "Non-zero ranks cannot drain on their own: rank 0 stops every TP rank
        # via the ShutdownReq broadcast, and the orchestrator's kill timeout is the backstop."
        signal.signal(signal.SIGTERM, lambda *_: logger.warning(
            "SIGTERM received on node_rank %d; waiting for the rank-0 ShutdownReq broadcast to stop the schedulers.",
            args.node_rank))
        sock, rfile, hosts = rendezvous_follower(args, timeout)
        logger.info("node rank %d ready; nodes %s. Non-zero-rank nodes do not run tokenizer processes; "
                    "health check server at http://%s:%d", args.node_rank, ",".join(hosts), args.host, args.port)
        httpd = _Server((args.host, args.port), dummy_health_handler())
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        follower_loop(sock, rfile)
        return 1
    peers, hosts = rendezvous_head(args, timeout) if args.nnodes > 1 else ([], [socket.gethostname()])

    def shutdown(*_):
        # rank 0's ShutdownReq broadcast stops every rank, then rank 0 exits
        for p in peers:
            try:
                p.sock.sendall(b'{"shutdown": true}\n')
            except OSError:
                pass
        sys.exit(0)

    signal.signal(signal.SIGTERM, shutdown)
    httpd = _Server((args.host, args.port), api_handler(args, served, hosts, peers))
    threading.Thread(target=watchdog, args=(peers, ping_s), daemon=True).start()
    logger.info("Serving %s as %s on nodes %s (tp=%d nnodes=%d)", model, served, ",".join(hosts), args.tp_size,
                args.nnodes)
    logger.info("The server is fired up and ready to roll!")
    try:
        httpd.serve_forever(poll_interval=0.2)
    finally:
        httpd.server_close()
    return 0


def cli():
    """`sglang serve ARGS` (sglang/cli/ in 0.5.23): the same parser and start-up."""
    if len(sys.argv) >= 2 and sys.argv[1] == "serve":
        sys.exit(main(sys.argv[2:]))
    if len(sys.argv) >= 2 and sys.argv[1] == "version":
        print(__version__)
        sys.exit(0)
    print("usage: sglang {serve,version} ...", file=sys.stderr)
    sys.exit(2)
