"""`vllm` console script of the LAB STAND-IN (spark-cluster lab): behaves like the vLLM release it
plays at `vllm serve`'s edges (flags, executors, multi-node, failure semantics, HTTP API), without
GPUs. Which release: the `vllm` dist-info beside this package (set_version.py; the lab's venv
plays 0.33.0, its images 0.10.1.1 / 0.20.1 / 0.31.0); `vllm --version` prints it.

Flags: flags.py builds the parser from that version's table, config/vllmFlags/<version>.json,
generated from vLLM's own argument definitions (lab/vllm_standin/gen_flags.py). Unknown flags exit
2 (`vllm: error: unrecognized arguments: ...`): 0.10.x has no --nnodes/--node-rank/--master-addr.

Executors, as ParallelConfig.__post_init__ picks them (CUDA platform) in each release
(vllm/config/parallel.py; EXECUTOR_RULES below; the releases in between are not known here):
  * 0.10.x: no --distributed-executor-backend, TP x PP > 1: "ray" when this node has fewer GPUs
    than TP x PP (without Ray: "Unable to load Ray: No module named 'ray'. Ray is required for
    multi-node inference, please install Ray with `pip install ray`."), else "mp". No multi-node
    mp at all (no --nnodes).
  * 0.11.x: "mp" when --nnodes > 1; fewer local GPUs than TP x PP fails ("Tensor parallel size (2)
    cannot be larger than the number of available GPUs (1)."); --nnodes > 1 only with mp ("nnodes >
    1 can only be set when distributed exectuor backend is mp.", vLLM's spelling).
  * 0.17 and later (0.20.1, 0.31.0, 0.33.0 checked): "mp" when --nnodes > 1; with --nnodes 1 and fewer
    local GPUs than TP x PP it fails ("World size (2) is larger than the number of available GPUs
    (1) in this node. If this is intentional and you are using:\n- ray, set
    '--distributed-executor-backend ray'.\n- multiprocessing, set '--nnodes' appropriately."): Ray is
    never chosen by default; --nnodes > 1 is only allowed with mp/uni/external_launcher.
  In every release: world size 1 means "uni"; `--data-parallel-backend ray` means "ray".
  * ray: `import ray` happens only here (vllm/v1/executor/ray_utils.py imports it in a try; without
    Ray: "Failed to import Ray: ...Please install Ray with `pip install ray`."), so mp/uni run in an
    image without Ray. ray.init(address="auto") (real vLLM calls ray.init() with no address, which
    would start a private one-node Ray when none runs; the stand-in fails fast instead), then a
    placement group of TP x PP one-GPU bundles (PACK); if the cluster lacks GPUs it warns like
    initialize_ray_cluster(), waits LAB_VLLM_PG_WAIT_S (default 60; vLLM: PG_WAIT_TIMEOUT = 1800)
    and fails like _wait_until_pg_ready() ("Cannot provide a placement group requiring 3 GPUs
    (placement_group_specs=...) within 60 seconds."). One ShardWorker actor per bundle.
  * mp multi-node (0.11 and later; vllm/entrypoints/cli/serve.py run_headless): the head runs
    `vllm serve M --nnodes N --node-rank 0 --master-addr A [--master-port P (default 29501)]`, every
    other node `... --node-rank K --headless`; the head waits (LAB_VLLM_MP_WAIT_S, default 300) for
    the peers on A:P (a TCP stand-in for the torch.distributed store).

Failure semantics (vLLM 0.33):
  * vllm/v1/executor/ray_executor_v2.py start_worker_monitor(): a dead Ray worker ("RayWorkerProc
    rank=%s died unexpectedly, shutting down executor.") fails the executor and the engine core;
    vllm/v1/executor/multiproc_executor.py does the same for a dead worker process;
    vllm/v1/engine/core_client.py then marks the engine dead (resources.engine_dead).
  * vllm/entrypoints/serve/instrumentator/health.py: /health answers 503 once the engine is dead
    (EngineDeadError); requests fail with 500 "The server had an error while processing your
    request." (EngineDeadError.CLIENT_MESSAGE, vllm/v1/engine/exceptions.py).
  * vllm/entrypoints/launchers/launcher.py watchdog_loop() checks every VLLM_WATCHDOG_TIME_S = 5.0 s
    and terminate_if_errored() sets server.should_exit unless VLLM_KEEP_ALIVE_ON_ENGINE_DEATH
    (vllm/envs.py, "0" by default) is set: the API server shuts down.
  The stand-in pings every shard actor / headless peer every LAB_VLLM_SHARD_PING_S (default 1 s;
  a shard that does not answer for LAB_VLLM_SHARD_TIMEOUT_S, default 30, counts as lost), marks
  the engine dead at once (503/500 as above) and exits at the next 5 s watchdog tick with status
  LAB_VLLM_ENGINE_DEAD_EXIT (default 1, so systemd's Restart=on-failure restarts it). NOTE: in
  vLLM 0.33's source that path returns normally from run_server() (no explicit exit status), so a
  real server may well exit 0 here: set LAB_VLLM_ENGINE_DEAD_EXIT=0 to test a unit against that.
  A --headless peer does NOT exit when its head goes away (real vLLM 0.31 does not either: its
  workers wait on the dead head's queue); it closes the connection and waits to be stopped. The
  head's engine dies when a peer does.
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
from .flags import build_parser, release
from . import memory

logger = logging.getLogger("vllm")

LAB_HUB = "/var/lib/lab-sim/hub"
NODE_STATE = "/var/lib/lab-sim/node.json"
HEARTBEAT = b"."


class EngineError(Exception):
    """Startup failure, printed the way vLLM prints its ValueErrors."""


class EngineDead(Exception):
    """A shard or a peer is gone: the engine cannot serve any more."""


def _env_float(name, default):
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return float(default)


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
    """Where the model's shards live (list of dicts with rank, hostname, ip) and how to reach them.

    step() runs on every request (a dead shard fails it); check() is the watchdog's probe."""

    def __init__(self, backend, tp, pp, placements, step=None, check=None, close=None):
        self.backend = backend
        self.tp = tp
        self.pp = pp
        self.placements = placements
        self._step = step
        self._check = check
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

    def check(self):
        if self._check:
            self._check()

    def close(self):
        if self._close:
            try:
                self._close()
            except Exception as exc:  # closing a broken executor must not mask why it broke
                logger.warning("closing the executor: %s", exc)


def _import_ray():
    try:
        import ray  # noqa: F401  (lazy: images without Ray run mp/uni)
    except ImportError as exc:
        raise EngineError(f"Failed to import Ray: {exc}.Please install Ray with `pip install ray`.") from exc
    return ray


def _ray_executor(tp, pp):
    world = tp * pp
    ray = _import_ray()
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from .ray_shard import ShardWorker

    address = os.environ.get("RAY_ADDRESS", "auto")
    local = local_gpu_count()
    if world > local:
        logger.warning("Tensor parallel size (%d) exceeds available GPUs (%d). This may result in Ray placement "
                       "group allocation failures. Consider reducing tensor_parallel_size to %d or less, or "
                       "ensure your Ray cluster has %d GPUs available.", world, local, local, world)
    try:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    except ConnectionError as exc:
        raise EngineError(f"Could not connect to a running Ray cluster ({address}): {exc}. "
                          f"Start Ray first (ray start --head / ray start --address=...).") from exc
    wait_s = _env_float("LAB_VLLM_PG_WAIT_S", 60)
    specs = [{"GPU": 1.0}] * world
    if world > ray.cluster_resources().get("GPU", 0):
        logger.warning("The number of required GPUs exceeds the total number of available GPUs in the "
                       "placement group.")
    pg = placement_group(specs, strategy="PACK")
    t0 = time.time()
    ready = []
    interval = 10.0
    while time.time() - t0 < wait_s:
        ready, _ = ray.wait([pg.ready()], timeout=min(interval, max(0.1, wait_s - (time.time() - t0))))
        if ready:
            break
        interval *= 2
        logger.info("Waiting for creating a placement group of specs for %d seconds. specs=%s. Check `ray "
                    "status` and `ray list nodes` to see if you have enough resources, and make sure the IP "
                    "addresses used by ray cluster are the same as VLLM_HOST_IP environment variable "
                    "specified in each node if you are running on a multi-node.", int(time.time() - t0), specs)
    if not ready:
        remove_placement_group(pg)
        gpus = int(ray.cluster_resources().get("GPU", 0))
        ray.shutdown()
        if world > 1:
            raise EngineError(f"Cannot provide a placement group requiring {world} GPUs "
                              f"(placement_group_specs={specs}) within {int(wait_s)} seconds.\n"
                              f"Tensor parallel size may exceed available GPUs in your cluster. Check resources "
                              f"with `ray status` and `ray list nodes`.\n(LAB STAND-IN: the Ray cluster has "
                              f"{gpus} GPUs; tensor_parallel_size={tp} x pipeline_parallel_size={pp} needs {world}.)")
        raise EngineError(f"Cannot provide a placement group of placement_group_specs={specs} within "
                          f"{int(wait_s)} seconds. See `ray status` and `ray list nodes` to make sure the "
                          f"cluster has enough resources.")
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
        logger.info("rank %d -> %s (%s) gpu_ids=%s pid=%s", p["rank"], p["hostname"], p["ip"], p["gpu_ids"], p["pid"])

    timeout_s = _env_float("LAB_VLLM_SHARD_TIMEOUT_S", 30)
    last_ok = [time.time()]

    def _call(method, timeout):
        try:
            ray.get([getattr(a, method).remote() for a in actors], timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            if time.time() - last_ok[0] > timeout_s:
                raise EngineDead(f"shard workers did not answer for {int(timeout_s)}s") from None
            return
        except ray.exceptions.RayActorError as exc:
            dead = next((p for p, a in zip(placements, actors) if _actor_dead(ray, a)), None)
            who = f"rank={dead['rank']} on {dead['hostname']}" if dead else "a worker"
            logger.error("RayWorkerProc %s died unexpectedly, shutting down executor.", who)
            raise EngineDead(f"RayWorkerProc {who} died unexpectedly: {type(exc).__name__}") from None
        except ray.exceptions.RaySystemError as exc:
            raise EngineDead(f"Ray system error: {exc}") from None
        last_ok[0] = time.time()

    def close():
        for a in actors:
            try:
                ray.kill(a)
            except Exception:
                pass
        try:
            remove_placement_group(pg)
        except Exception:
            pass
        ray.shutdown()

    return Shards("ray", tp, pp, placements, step=lambda: _call("step", 60),
                  check=lambda: _call("ping", max(1.0, _env_float("LAB_VLLM_SHARD_PING_S", 1))), close=close)


def _actor_dead(ray, actor):
    try:
        ray.get(actor.ping.remote(), timeout=2)
        return False
    except Exception:
        return True


class PeerLink:
    """One TCP connection between the mp head and a headless peer, with heartbeats both ways:
    each side sends a byte every LAB_VLLM_SHARD_PING_S and declares the other gone on EOF, on an
    error, or after LAB_VLLM_PEER_TIMEOUT_S (default 10) of silence (a powered-off node sends no FIN)."""

    def __init__(self, conn, name):
        self.conn = conn
        self.name = name
        self.lost = None
        self._stop = threading.Event()
        self._last = time.time()

    def start(self, on_lost):
        ping = max(0.2, _env_float("LAB_VLLM_SHARD_PING_S", 1))
        timeout = _env_float("LAB_VLLM_PEER_TIMEOUT_S", 10)
        self.conn.settimeout(ping)

        def reader():
            while not self._stop.is_set():
                try:
                    data = self.conn.recv(64)
                except socket.timeout:
                    if time.time() - self._last > timeout:
                        self._lose(f"{self.name} sent nothing for {int(timeout)}s", on_lost)
                        return
                    continue
                except OSError as exc:
                    self._lose(f"{self.name}: {exc}", on_lost)
                    return
                if not data:
                    self._lose(f"{self.name} closed the connection", on_lost)
                    return
                self._last = time.time()

        def writer():
            while not self._stop.wait(ping):
                try:
                    self.conn.sendall(HEARTBEAT)
                except OSError as exc:
                    self._lose(f"{self.name}: {exc}", on_lost)
                    return

        threading.Thread(target=reader, daemon=True, name=f"peer-reader-{self.name}").start()
        threading.Thread(target=writer, daemon=True, name=f"peer-writer-{self.name}").start()

    def _lose(self, why, on_lost):
        if self.lost is None and not self._stop.is_set():
            self.lost = why
            on_lost(why)

    def close(self):
        self._stop.set()
        try:
            self.conn.close()
        except OSError:
            pass


def _keep_store_listening(srv):
    """Accepts and closes connections on the master port for the rest of the process."""
    srv.settimeout(None)
    while True:
        try:
            conn, _ = srv.accept()
            conn.close()
        except OSError:
            return


def _mp_head(args, tp, pp):
    nnodes = args.nnodes
    port = args.master_port or 29501
    wait_s = _env_float("LAB_VLLM_MP_WAIT_S", 300)
    peers = {}
    srv = socket.create_server(("0.0.0.0", port), reuse_port=False)
    srv.settimeout(1.0)
    logger.info("mp multi-node head: waiting up to %ds for %d headless node(s) on port %d",
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
            conn.sendall(b'{"ok": false, "error": "bad or duplicate node rank"}\n')
            conn.close()
            continue
        conn.sendall(json.dumps({"ok": True, "world_size": tp * pp}).encode() + b"\n")
        peers[rank] = (conn, hello)
        logger.info("node rank %d joined from %s (%s)", rank, hello.get("hostname"), addr[0])
    if len(peers) < nnodes - 1:
        srv.close()
        for conn, _ in peers.values():
            conn.close()
        raise EngineError(f"Timed out after {int(wait_s)}s waiting for {nnodes - 1} headless node(s) to join "
                          f"the torch.distributed store at {args.master_addr}:{port}; "
                          f"joined: {sorted(peers)}")
    # Like torch's TCPStore on the master port, the store keeps listening while the engine runs
    # (late connections are closed at once): the port is there to be firewalled and scanned.
    threading.Thread(target=_keep_store_listening, args=(srv,), daemon=True).start()
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
    links = {rank: PeerLink(conn, f"headless node rank {rank} ({hello.get('hostname')})")
             for rank, (conn, hello) in peers.items()}
    lost = []

    def on_lost(why):
        lost.append(why)
        logger.error("%s: the distributed group is broken, shutting down executor.", why)

    for link in links.values():
        link.start(on_lost)

    def check():
        if lost:
            raise EngineDead(lost[0])

    def close():
        for link in links.values():
            link.close()

    return Shards("mp", tp, pp, placements, step=check, check=check, close=close)


def _mp_headless(args):
    port = args.master_port or 29501
    wait_s = _env_float("LAB_VLLM_MP_WAIT_S", 300)
    deadline = time.time() + wait_s
    last = None
    logger.info("Launching vLLM (v%s) headless multiproc executor, with head node address %s:%d for "
                "torch.distributed process group.", __version__, args.master_addr, port)
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
    hello = {"node_rank": args.node_rank, "hostname": socket.gethostname(), "ip": conn.getsockname()[0]}
    conn.sendall(json.dumps(hello).encode() + b"\n")
    conn.settimeout(30)
    reply = json.loads(conn.makefile("r").readline() or "{}")
    if not reply.get("ok"):
        raise EngineError(f"head refused node rank {args.node_rank}: {reply.get('error')}")
    logger.info("headless node rank %d joined %s:%d; serving shards until the head goes away",
                args.node_rank, args.master_addr, port)
    gone = threading.Event()
    link = PeerLink(conn, f"head node {args.master_addr}:{port}")
    link.start(lambda why: gone.set())
    stop = threading.Event()

    def on_signal(signum, _frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while not stop.is_set():
        if gone.wait(0.5):
            break
    link.close()
    if stop.is_set():
        return 0
    # Real vLLM (0.31, checked on the lab's real-vLLM runtime): the headless rank does not notice.
    # run_headless() watches only its local workers, which wait on the head's broadcast queue
    # (vllm/distributed/device_communicators/shm_broadcast.py) and log this every
    # VLLM_RINGBUFFER_WARNING_INTERVAL (60 s) until they are stopped. The stand-in closes its end
    # of the connection (real workers leave theirs in CLOSE_WAIT: neither is "established") and waits.
    interval = _env_float("VLLM_RINGBUFFER_WARNING_INTERVAL", 60)
    while not stop.wait(interval):
        logger.info("No available shared memory broadcast block found in %d seconds. This typically happens "
                    "when some processes are hanging or doing some time-consuming work (e.g. compilation, "
                    "weight/kv cache quantization).", int(interval))
    return 0


def main(argv=None):
    if (sys.argv[1:] if argv is None else list(argv))[:2] == ["bench", "serve"]:
        from .bench import main as bench_main  # `vllm bench serve`: the stand-in load generator (bench.py)
        return bench_main((sys.argv[1:] if argv is None else list(argv))[2:])
    _setup_logging()
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    for name in ("nnodes", "node_rank", "master_addr", "master_port"):   # no such flags before 0.11
        if not hasattr(args, name):
            setattr(args, name, None)
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


def _ray_import_error():
    """None when `import ray` works, else why not (vLLM's ray_utils keeps the ImportError's text)."""
    try:
        import ray  # noqa: F401
    except ImportError as exc:
        return str(exc)
    return None


# ParallelConfig.__post_init__'s default-executor rules, by the first release (of those with a
# flag table) that has them: 0.10.1.1, 0.11.1, 0.17.1 (unchanged through 0.33.0).
EXECUTOR_RULES = ((0, 17), (0, 11), (0, 10))


def executor_rules():
    v = release(__version__)
    return next((r for r in EXECUTOR_RULES if v >= r), EXECUTOR_RULES[-1])


def _choose_backend(args, world, dp, nnodes):
    """vllm/config/parallel.py ParallelConfig.__post_init__ (CUDA platform) of the release played."""
    rules = executor_rules()
    backend = args.distributed_executor_backend
    gpus = local_gpu_count()
    if backend is None and world * dp > 1:
        if rules >= (0, 11) and nnodes > 1:
            backend = "mp"
        elif gpus < world and rules == (0, 10):
            err = _ray_import_error()
            if err is not None:
                raise EngineError(f"Unable to load Ray: {err}. Ray is required for multi-node inference, please "
                                  f"install Ray with `pip install ray`.")
            backend = "ray"
        elif gpus < world and rules == (0, 11):
            raise EngineError(f"Tensor parallel size ({world}) cannot be larger than the number of available "
                              f"GPUs ({gpus}).")
        elif gpus < world:
            raise EngineError(f"World size ({world}) is larger than the number of available GPUs "
                              f"({gpus}) in this node. If this is intentional and you are using:\n"
                              f"- ray, set '--distributed-executor-backend ray'.\n"
                              f"- multiprocessing, set '--nnodes' appropriately.")
        elif (args.data_parallel_backend or "mp") == "ray":
            backend = "ray"
        else:
            backend = "mp"
    if backend is None and world == 1:
        backend = "uni"
    if nnodes > 1 and rules == (0, 11) and backend != "mp":
        raise EngineError("nnodes > 1 can only be set when distributed exectuor backend is mp.")
    if nnodes > 1 and backend not in ("mp", "uni", "external_launcher"):
        raise EngineError("nnodes > 1 can only be set when distributed executor backend is mp, uni or "
                          "external_launcher.")
    return backend


def _startup_memory_check(args, model_dir):
    """The GPU worker's start-up check (vLLM's request_memory(); memory.py says what it follows)."""
    snap = memory.snapshot(NODE_STATE, model_dir)
    if snap is None:
        logger.info("LAB STAND-IN: no node description with GPU memory here; the start-up memory check is not simulated")
        return
    free, total, unified = snap
    gmu = args.gpu_memory_utilization if args.gpu_memory_utilization is not None else 0.9
    requested, problem = memory.request_memory(free, total, gmu)
    logger.info("Free memory on device cuda:0 at start: %.2f/%.2f GiB (%s), requested %.2f GiB",
                free / memory.GIB, total / memory.GIB,
                "unified memory: the node's available memory" if unified else "discrete GPU", requested / memory.GIB)
    if problem:
        raise EngineError(problem)
    kv_bytes = getattr(args, "kv_cache_memory_bytes", None)
    if kv_bytes:
        logger.info("Initial free memory %.2f GiB, reserved %.2f GiB memory for KV Cache as specified by "
                    "kv_cache_memory_bytes config and skipped memory profiling.", free / memory.GIB, kv_bytes / memory.GIB)


def serve(args):
    model = args.model_tag or args.model
    if not model:
        raise EngineError("vllm serve needs a model: vllm serve MODEL [options]")
    tp = args.tensor_parallel_size or 1
    pp = args.pipeline_parallel_size or 1
    dp = args.data_parallel_size or 1
    if tp < 1 or pp < 1 or dp < 1:
        raise EngineError("tensor_parallel_size, pipeline_parallel_size and data_parallel_size must be >= 1")
    world = tp * pp
    gmu = args.gpu_memory_utilization
    if gmu is not None and not 0 < gmu <= 1:
        raise EngineError(f"GPU memory utilization must be within (0, 1]. Got {gmu}.")
    nnodes = args.nnodes or 1
    node_rank = args.node_rank or 0
    if node_rank >= nnodes:
        raise EngineError(f"node_rank ({node_rank}) must be smaller than nnodes ({nnodes})")
    logger.info("vLLM API server version %s (LAB STAND-IN)", __version__)
    logger.info("non-default args: %s", {k: v for k, v in vars(args).items()
                                         if v not in (None, False) and k not in ("api_key", "subcommand", "version")})
    if dp > 1:
        raise EngineError("LAB STAND-IN: data parallelism (--data-parallel-size > 1) is not simulated")
    if args.headless:
        if args.api_server_count is not None and args.api_server_count > 0:
            raise EngineError(f"--api-server-count={args.api_server_count} cannot be used with --headless "
                              f"(no API servers are started in headless mode).")
        if nnodes < 2 or node_rank < 1:
            raise EngineError("LAB STAND-IN: --headless is simulated for multi-node TP/PP only "
                              "(--nnodes > 1 and --node-rank >= 1)")
        backend = _choose_backend(args, world, dp, nnodes)
        if backend != "mp":
            raise EngineError(f"LAB STAND-IN: --headless needs the mp executor, not {backend}")
        _startup_memory_check(args, resolve_model(model, args.download_dir))
        return _mp_headless(args)
    model_dir = resolve_model(model, args.download_dir)
    _startup_memory_check(args, model_dir)
    backend = _choose_backend(args, world, dp, nnodes)
    logger.info("Using the %s distributed executor backend (world size %d, %d node(s))", backend, world, nnodes)
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
        return run_server(cfg, stop)
    finally:
        shards.close()


if __name__ == "__main__":
    sys.exit(main())
