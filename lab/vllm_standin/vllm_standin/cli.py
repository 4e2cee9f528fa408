"""`vllm` console script of the LAB STAND-IN (spark-cluster lab).

`vllm serve MODEL [flags]`: validates flags like vLLM, resolves the model (local dir, HF cache,
or the lab's simulated hub), sets up the executor (Ray placement group of 1-GPU bundles with one
actor per shard, vLLM's own multi-node `mp` mode, or a single process) and then serves the
OpenAI-compatible HTTP API. Answers name the nodes that hold the shards.
"""

import json
import logging
import os
import shutil
import signal
import socket
import sys
import threading
import time

from . import __version__
from .flags import build_parser

logger = logging.getLogger("vllm")

LAB_HUB = "/var/lib/lab-sim/hub"
NODE_STATE = "/var/lib/lab-sim/node.json"


class EngineError(Exception):
    """Startup failure, printed the way vLLM prints its ValueErrors."""


def _setup_logging():
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s",
                        datefmt="%m-%d %H:%M:%S")


def local_gpu_count():
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        with open(NODE_STATE, encoding="utf-8") as fh:
            n = len(json.load(fh).get("gpus", []))
    except OSError:
        # Inside a container started with `--gpus all` (NVIDIA_VISIBLE_DEVICES set by the
        # toolkit's hook): the lab's nodes have one GPU each.
        nvd = os.environ.get("NVIDIA_VISIBLE_DEVICES", "")
        n = 0 if nvd in ("", "void", "none") else (1 if nvd == "all" else len(nvd.split(",")))
    if cvd is not None:
        n = min(n, len([x for x in cvd.split(",") if x.strip()]))
    return n


def resolve_model(model, download_dir=None):
    """Return a local directory for MODEL like vLLM/huggingface_hub would find or fetch it."""
    if os.path.isdir(model):
        if not os.path.exists(os.path.join(model, "config.json")):
            raise EngineError(f"Invalid repository ID or local directory specified: '{model}'. "
                              f"Please verify the following requirements:\n1. Provide a valid Hugging Face "
                              f"repository ID.\n2. Specify a local directory that contains a recognized "
                              f"configuration file.")
        return os.path.abspath(model)
    if model.startswith("/") or model.startswith(".") or model.count("/") != 1:
        raise EngineError(f"Invalid repository ID or local directory specified: '{model}'.")
    hf_home = os.environ.get("HF_HOME", os.path.expanduser("~/.cache/huggingface"))
    cache = download_dir or os.environ.get("HF_HUB_CACHE") or os.path.join(hf_home, "hub")
    snap_root = os.path.join(cache, "models--" + model.replace("/", "--"), "snapshots")
    if os.path.isdir(snap_root):
        for rev in sorted(os.listdir(snap_root)):
            if os.path.exists(os.path.join(snap_root, rev, "config.json")):
                return os.path.join(snap_root, rev)
    if os.environ.get("HF_HUB_OFFLINE") in ("1", "true", "True", "YES", "yes"):
        raise EngineError(f"Cannot find the requested files in the local cache for '{model}' and "
                          f"HF_HUB_OFFLINE=1 forbids downloading them.")
    src = os.path.join(LAB_HUB, model)
    if not os.path.isdir(src):
        raise EngineError(f"{model} is not a local folder and is not a valid model identifier listed on "
                          f"'https://huggingface.co/models' (LAB STAND-IN hub: {LAB_HUB})")
    dest = os.path.join(snap_root, "0" * 40)
    os.makedirs(dest, exist_ok=True)
    for name in os.listdir(src):
        if os.path.isfile(os.path.join(src, name)):
            shutil.copy2(os.path.join(src, name), os.path.join(dest, name))
    try:
        with open("/var/lib/lab-sim/hf-downloads.log", "a", encoding="utf-8") as fh:
            fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {model} -> {dest} (vllm serve)\n")
    except OSError:
        pass
    logger.info("Downloaded %s into %s (LAB STAND-IN hub)", model, dest)
    return dest


class Shards:
    """Where the model's shards live: list of dicts with rank, hostname, ip."""

    def __init__(self, backend, tp, pp, placements, step=None, close=None):
        self.backend = backend
        self.tp = tp
        self.pp = pp
        self.placements = placements
        self._step = step
        self._close = close

    @property
    def hosts(self):
        seen = []
        for p in self.placements:
            if p["hostname"] not in seen:
                seen.append(p["hostname"])
        return seen

    def step(self):
        if self._step:
            self._step()

    def close(self):
        if self._close:
            self._close()


def _ray_executor(tp, pp):
    world = tp * pp
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from .ray_shard import ShardWorker

    address = os.environ.get("RAY_ADDRESS", "auto")
    try:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    except ConnectionError as exc:
        raise EngineError(f"Could not connect to a running Ray cluster ({address}): {exc}. "
                          f"Start Ray first (ray start --head / ray start --address=...).") from exc
    wait_s = float(os.environ.get("LAB_VLLM_PG_WAIT_S", "60"))
    deadline = time.time() + wait_s
    gpus = ray.cluster_resources().get("GPU", 0)
    if world > gpus:
        logger.warning("The number of required GPUs exceeds the total number of available GPUs in the "
                       "placement group. (world_size=%d, GPUs in the Ray cluster=%d)", world, int(gpus))
        while time.time() < deadline and ray.cluster_resources().get("GPU", 0) < world:
            time.sleep(1)
        gpus = ray.cluster_resources().get("GPU", 0)
        if world > gpus:
            raise EngineError(
                f"The number of required GPUs exceeds the total number of available GPUs in the placement "
                f"group: tensor_parallel_size={tp} x pipeline_parallel_size={pp} requires {world} GPUs "
                f"but only {int(gpus)} GPUs are available in the Ray cluster. Cannot provide a placement "
                f"group of placement_group_specs={[{'GPU': 1.0}] * world} within {int(wait_s)} seconds. "
                f"See `ray status` and `ray list nodes` to make sure the cluster has enough resources.")
    pg = placement_group([{"GPU": 1.0}] * world, strategy="PACK")
    remaining = max(5.0, deadline - time.time())
    ready, _ = ray.wait([pg.ready()], timeout=remaining)
    if not ready:
        remove_placement_group(pg)
        raise EngineError(f"Cannot provide a placement group of placement_group_specs={[{'GPU': 1.0}] * world} "
                          f"within {int(wait_s)} seconds. See `ray status` and `ray list nodes` to make sure "
                          f"the cluster has enough resources.")
    actors = [
        ShardWorker.options(
            num_gpus=1, num_cpus=0,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=pg, placement_group_bundle_index=rank),
        ).remote(rank)
        for rank in range(world)
    ]
    infos = ray.get([a.info.remote() for a in actors], timeout=180)
    # Like vLLM's Ray executor: workers on the driver's node first, then by node IP; ranks follow
    # that order, so rank 0 is where `vllm serve` runs.
    driver_node = ray.get_runtime_context().get_node_id()
    order = sorted(range(world), key=lambda k: (infos[k]["node_id"] != driver_node, infos[k]["ip"], k))
    actors = [actors[k] for k in order]
    placements = [dict(infos[k], rank=r) for r, k in enumerate(order)]
    for p in placements:
        logger.info("rank %d -> %s (%s) gpu_ids=%s", p["rank"], p["hostname"], p["ip"], p["gpu_ids"])

    def step():
        ray.get([a.step.remote() for a in actors], timeout=60)

    def close():
        for a in actors:
            ray.kill(a)
        remove_placement_group(pg)
        ray.shutdown()

    return Shards("ray", tp, pp, placements, step, close)


def _mp_head(args, tp, pp):
    nnodes = args.nnodes
    port = args.master_port or 29501
    wait_s = float(os.environ.get("LAB_VLLM_MP_WAIT_S", "300"))
    peers = {}
    srv = socket.create_server(("0.0.0.0", port), reuse_port=False)
    srv.settimeout(1.0)
    logger.info("mp multi-node head: waiting up to %ds for %d headless peer(s) on port %d",
                int(wait_s), nnodes - 1, port)
    deadline = time.time() + wait_s
    while len(peers) < nnodes - 1 and time.time() < deadline:
        try:
            conn, addr = srv.accept()
        except socket.timeout:
            continue
        conn.settimeout(10)
        try:
            hello = json.loads(conn.makefile("r").readline())
        except (OSError, ValueError):
            conn.close()
            continue
        rank = int(hello.get("node_rank", -1))
        if not 0 < rank < nnodes or rank in peers:
            conn.sendall(b'{"ok": false, "error": "bad node rank"}\n')
            conn.close()
            continue
        conn.sendall(json.dumps({"ok": True, "world_size": tp * pp}).encode() + b"\n")
        conn.settimeout(None)
        peers[rank] = (conn, hello)
        logger.info("node rank %d joined from %s (%s)", rank, hello.get("hostname"), addr[0])
    srv.close()
    if len(peers) < nnodes - 1:
        for conn, _ in peers.values():
            conn.close()
        raise EngineError(f"Timed out after {int(wait_s)}s waiting for {nnodes - 1} headless node(s) to join "
                          f"the torch.distributed store at {args.master_addr}:{port}; "
                          f"joined: {sorted(peers)}")
    per_node = (tp * pp) // nnodes
    placements = []
    me = socket.gethostname()
    for r in range(per_node):
        placements.append({"rank": r, "hostname": me, "ip": args.master_addr, "gpu_ids": [r]})
    for nr in sorted(peers):
        hello = peers[nr][1]
        for r in range(per_node):
            placements.append({"rank": nr * per_node + r, "hostname": hello["hostname"],
                               "ip": hello.get("ip", "?"), "gpu_ids": [r]})

    def watch(rank, conn):
        try:
            data = conn.recv(1)
        except OSError:
            data = b""
        if not data:
            logger.error("headless node rank %d went away: the distributed group is broken; exiting", rank)
            os._exit(1)

    for rank, (conn, _) in peers.items():
        threading.Thread(target=watch, args=(rank, conn), daemon=True).start()

    def close():
        for conn, _ in peers.values():
            try:
                conn.close()
            except OSError:
                pass

    return Shards("mp", tp, pp, placements, None, close)


def _mp_headless(args):
    port = args.master_port or 29501
    if not args.master_addr:
        raise EngineError("--headless with --nnodes > 1 needs --master-addr of the node-rank 0 host")
    wait_s = float(os.environ.get("LAB_VLLM_MP_WAIT_S", "300"))
    deadline = time.time() + wait_s
    last = None
    while time.time() < deadline:
        try:
            conn = socket.create_connection((args.master_addr, port), timeout=5)
            break
        except OSError as exc:
            last = exc
            time.sleep(1)
    else:
        raise EngineError(f"Could not reach the head's torch.distributed store at {args.master_addr}:{port} "
                          f"within {int(wait_s)}s: {last}")
    hello = {"node_rank": args.node_rank, "hostname": socket.gethostname(),
             "ip": conn.getsockname()[0]}
    conn.sendall(json.dumps(hello).encode() + b"\n")
    reply = json.loads(conn.makefile("r").readline() or "{}")
    if not reply.get("ok"):
        raise EngineError(f"head refused node rank {args.node_rank}: {reply.get('error')}")
    logger.info("headless node rank %d joined %s:%d; serving shards until the head goes away",
                args.node_rank, args.master_addr, port)
    while True:
        data = conn.recv(1)
        if not data:
            logger.error("lost the connection to the head node; exiting")
            return 1


def main(argv=None):
    if (sys.argv[1:] if argv is None else list(argv))[:2] == ["bench", "serve"]:
        from .bench import main as bench_main  # `vllm bench serve`: the stand-in load generator (bench.py)
        return bench_main((sys.argv[1:] if argv is None else list(argv))[2:])
    _setup_logging()
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.version:
        print(__version__)
        return 0
    if args.subcommand != "serve":
        parser.print_help()
        return 2
    try:
        return serve(args)
    except EngineError as exc:
        logger.error("%s", exc)
        print(f"ValueError: {exc}", file=sys.stderr)
        return 1


def serve(args):
    model = args.model_tag or args.model
    if not model:
        raise EngineError("vllm serve needs a model: vllm serve MODEL [options]")
    tp = args.tensor_parallel_size or 1
    pp = args.pipeline_parallel_size or 1
    if tp < 1 or pp < 1:
        raise EngineError("tensor_parallel_size and pipeline_parallel_size must be >= 1")
    world = tp * pp
    gmu = args.gpu_memory_utilization
    if gmu is not None and not 0 < gmu <= 1:
        raise EngineError(f"GPU memory utilization must be within (0, 1]. Got {gmu}.")
    nnodes = args.nnodes or 1
    node_rank = args.node_rank or 0
    logger.info("vLLM API server version %s (LAB STAND-IN)", __version__)
    logger.info("non-default args: %s", {k: v for k, v in vars(args).items()
                                         if v not in (None, False) and k not in ("api_key", "subcommand", "version")})
    if args.headless:
        if nnodes < 2 or node_rank < 1:
            raise EngineError("--headless requires --nnodes > 1 and --node-rank >= 1")
        resolve_model(model, args.download_dir)
        return _mp_headless(args)
    model_dir = resolve_model(model, args.download_dir)
    backend = args.distributed_executor_backend
    if backend is None:
        backend = "mp" if nnodes > 1 else ("ray" if world > 1 else "uni")
    if backend == "mp":
        if world % nnodes:
            raise EngineError(f"world_size ({world}) must be divisible by nnodes ({nnodes})")
        local = world // nnodes
        gpus = local_gpu_count()
        if local > gpus:
            raise EngineError(f"World size ({local}) is larger than the number of available GPUs ({gpus}) in "
                              f"this node. If this is intentional and you are using:\n- ray, set "
                              f"'--distributed-executor-backend ray'.\n- multiprocessing, set '--nnodes' "
                              f"appropriately.")
        if nnodes > 1:
            if node_rank != 0:
                raise EngineError("node rank > 0 must run with --headless")
            shards = _mp_head(args, tp, pp)
        else:
            shards = Shards("mp", tp, pp, [{"rank": r, "hostname": socket.gethostname(), "ip": "127.0.0.1",
                                            "gpu_ids": [r]} for r in range(world)])
    elif backend == "ray":
        shards = _ray_executor(tp, pp)
    elif backend == "uni":
        if world != 1:
            raise EngineError("the uni executor supports world_size 1 only")
        if local_gpu_count() < 1:
            raise EngineError("No CUDA GPUs are available")
        shards = Shards("uni", 1, 1, [{"rank": 0, "hostname": socket.gethostname(), "ip": "127.0.0.1",
                                       "gpu_ids": [0]}])
    else:
        raise EngineError(f"distributed executor backend {backend} is not supported by the lab stand-in")

    from .server import ServerConfig, run_server
    api_keys = list(args.api_key or [])
    if not api_keys and os.environ.get("VLLM_API_KEY"):
        api_keys = [os.environ["VLLM_API_KEY"]]
    served = list(args.served_model_name or [model])
    cfg = ServerConfig(model=model, model_dir=model_dir, served_names=served, api_keys=api_keys,
                       shards=shards, max_model_len=args.max_model_len,
                       host=args.host or "0.0.0.0", port=args.port or 8000)

    stop = threading.Event()

    def on_signal(signum, _frame):
        logger.info("received signal %d, shutting down", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        run_server(cfg, stop)
    finally:
        shards.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
