"""spark-cluster NCCL check: an all-reduce across the cluster's nodes with the runtime's own torch.

Launched once per node (one rank per node, one GPU each) with the rank, the world size and the
master address/port (rank 0's interconnect address) on the command line or in the environment
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK). It measures all-reduce over a few
message sizes and reports, like nccl-tests (doc/PERFORMANCE.md):

    algbw = bytes / time        busbw = algbw * 2 * (n - 1) / n        (GB/s = 1e9 bytes/s)

time being the slowest rank's mean time per all-reduce. The verdict is on the peak bus bandwidth
over the sizes (the largest message, as a rule), against --pass-mark (default 21.875 GB/s:
NVIDIA's pass mark for a Spark pair's 200 Gb/s RoCE link).

With a GPU the backend is NCCL and the transport is what NCCL says it used: NCCL_DEBUG=INFO is set
for this process only, its log goes to a file (NCCL_DEBUG_FILE), and the channel lines
("Channel 00/0 : 0[0] -> 1[1] via NET/IB/0") are parsed: NET/IB (RDMA, the good sign on a Spark
pair), NET/Socket (TCP: RoCE is not in use), or on one host P2P/... or SHM/... Without a GPU
(torch.cuda.is_available() false) it uses gloo on CPU tensors, so a lab measures its real link;
the transport is then gloo/TCP.

Last line on stdout, machine-readable (key=value, then units):
    nccl-check: busbw=23.41 GB/s algbw=11.70 GB/s transport=NET/IB pass_mark=21.875 GB/s result=pass ...
Exit status: 0 pass, 1 below the pass mark (or a wrong sum, or not the required transport),
2 error (no torch, init or collective failed), 124 overall timeout.

Bounded: init_process_group has --init-timeout, the whole run --timeout (a watchdog thread exits
the process with 124 even when a collective hangs in C++). Stdlib and torch only.
"""

import argparse
import datetime
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

PREFIX = "nccl-check:"
DEFAULT_PASS_MARK = 21.875
EXIT_PASS, EXIT_BELOW, EXIT_ERROR, EXIT_TIMEOUT = 0, 1, 2, 124
_print_lock = threading.Lock()
_result_printed = threading.Event()


def say(msg):
    with _print_lock:
        print(f"{PREFIX} {msg}", flush=True)


def result_line(fields):
    """The one machine-readable line. Printed once: the watchdog and the main thread may race."""
    with _print_lock:
        if _result_printed.is_set():
            return
        _result_printed.set()
        parts = []
        for key, value in fields.items():
            if value is None:
                continue
            text = str(value)
            if key in ("busbw", "algbw", "pass_mark", "avg_busbw"):
                text = f"{value:.3f} GB/s" if isinstance(value, float) else f"{value} GB/s"
            parts.append(f"{key}={text}")
        print(f"{PREFIX} " + " ".join(parts), flush=True)


def parse_size(text):
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]i?B?|B)?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 1M, 64MiB, 1G)")
    unit = (m.group(2) or "B").upper().rstrip("B").rstrip("I")
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[unit]
    return int(float(m.group(1)) * scale)


def human(nbytes):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return f"{nbytes}B"


def env_int(name, default=None):
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


def load_env_file(path, reader):
    """Variables of an env file as its reader sees them (components/render/host/envFile.ts):
    systemd strips the double quotes and the backslash escapes of " \\ ` $; docker takes the
    value verbatim. Comments and blank lines are skipped."""
    found = {}
    with open(path, encoding="utf-8") as fh:
        for raw in fh:
            line = raw.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#") or "=" not in line:
                continue
            key, value = line.split("=", 1)
            key = key.strip()
            if reader == "systemd" and len(value) >= 2 and value[0] == '"' and value[-1] == '"':
                value = re.sub(r'\\(["\\`$])', r"\1", value[1:-1])
            found[key] = value
    return found


def local_address_towards(addr, port):
    """The local address the kernel would use to reach addr (no packet is sent)."""
    try:
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((addr, port))
            return s.getsockname()[0]
    except OSError:
        return None


def interface_of(address):
    """The interface holding address (ip -o addr), or None."""
    if not address:
        return None
    if address.startswith("127.") or address == "::1":
        return "lo"
    try:
        out = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[3].split("/")[0] == address:
            return fields[1].split("@")[0]
    return None


# --- NCCL log ---------------------------------------------------------------------------------
_VIA = re.compile(r"Channel \d+/\d+ : .*? via (\S+)")
_NET_PLUGIN = re.compile(r"NET/(IB|Socket)\s*: Using (.*)")
_USING_NETWORK = re.compile(r"Using network (\S+)")
_VERSION = re.compile(r"NCCL version (\S+)")


def parse_nccl_log(text):
    """What NCCL says it used: the channels' transports, the network plugin, its devices."""
    vias, net_devices, network, version = [], [], None, None
    for line in text.splitlines():
        m = _VIA.search(line)
        if m and m.group(1) not in vias:
            vias.append(m.group(1))
        m = _NET_PLUGIN.search(line)
        if m:
            entry = f"NET/{m.group(1)}: {m.group(2).strip()}"
            if entry not in net_devices:
                net_devices.append(entry)
        m = _USING_NETWORK.search(line)
        if m:
            network = m.group(1)
        m = _VERSION.search(line)
        if m and not version:
            version = m.group(1)
    # The transport between ranks: any network path wins (that is what crosses nodes), IB first.
    def family(via):
        parts = via.split("/")
        return "/".join(parts[:2]) if parts[0] == "NET" else parts[0]

    families = []
    for via in vias:
        if family(via) not in families:
            families.append(family(via))
    transport = None
    for preferred in ("NET/IB", "NET/Socket"):
        if preferred in families:
            transport = preferred
            break
    if transport is None and families:
        transport = next((f for f in families if f.startswith("NET/")), families[0])
    return {"transport": transport, "vias": vias, "net_devices": net_devices, "network": network,
            "version": version}


def relevant_nccl_lines(text, limit=16):
    """The lines that say which network and transport NCCL used; channel lines that differ
    only in their channel number are shown once, with how many channels said the same."""
    keep, index = [], {}
    for line in text.splitlines():
        if not any(k in line for k in ("NET/", " via ", "Using network", "NCCL version", "WARN")):
            continue
        # Drop the host:pid:tid [device] prefix.
        body = re.sub(r"^\S+:\d+:\d+ \[\d+\] ", "", line.strip())
        key = re.sub(r"Channel \d+/\d+", "Channel", body)
        if key in index:
            index[key][1] += 1
            continue
        if len(keep) >= limit:
            continue
        index[key] = [body, 1]
        keep.append(key)
    return [index[k][0] + (f" (and {index[k][1] - 1} more channels alike)" if index[k][1] > 1 and "Channel" in k else "")
            for k in keep]


# --- the run ----------------------------------------------------------------------------------
def build_parser():
    p = argparse.ArgumentParser(prog="nccl_check.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--rank", type=int, default=env_int("RANK"))
    p.add_argument("--world-size", type=int, default=env_int("WORLD_SIZE"))
    p.add_argument("--master-addr", default=os.environ.get("MASTER_ADDR"),
                   help="rank 0's interconnect address (its TCP store listens there)")
    p.add_argument("--master-port", type=int, default=env_int("MASTER_PORT", 29500))
    p.add_argument("--local-rank", type=int, default=env_int("LOCAL_RANK", 0),
                   help="which of this node's GPUs (cuda:N) to use")
    p.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto",
                   help="auto: nccl when torch sees a GPU, else gloo on CPU tensors")
    p.add_argument("--pass-mark", type=float, default=DEFAULT_PASS_MARK,
                   help="minimum peak bus bandwidth in GB/s (default 21.875: NVIDIA's RoCE pass mark)")
    p.add_argument("--require-transport", default=None,
                   help="fail unless the transport starts with this (e.g. NET/IB on a RoCE cluster)")
    p.add_argument("--sizes", default=None,
                   help="comma-separated message sizes (default 1M,16M,64M,256M with NCCL, 1M,8M,32M with gloo)")
    p.add_argument("--iters", type=int, default=None, help="timed all-reduces per size (default 20 NCCL, 5 gloo)")
    p.add_argument("--warmup", type=int, default=None, help="untimed all-reduces per size (default 5 NCCL, 1 gloo)")
    p.add_argument("--size-budget", type=float, default=20.0,
                   help="seconds per size at most: fewer iterations when one takes long")
    p.add_argument("--init-timeout", type=float, default=120.0,
                   help="seconds for init_process_group (all ranks must join)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds for the whole check")
    p.add_argument("--env-file", default=None,
                   help="load variables from this env file first (the runtime's NCCL/Gloo names)")
    p.add_argument("--env-format", choices=("systemd", "docker"), default="systemd",
                   help="how --env-file is quoted (systemd: venv units; docker: --env-file verbatim)")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                   help="set a variable after --env-file (repeatable): overrides for the check only")
    p.add_argument("--keep-log", action="store_true", help="keep the NCCL debug log and print its path")
    return p


def start_watchdog(seconds, fields):
    def fire():
        fields = dict(base_fields)
        fields.update(result="error", reason=f"timeout-{seconds:g}s")
        say(f"giving up: the check did not finish within {seconds:g}s (--timeout)")
        result_line(fields)
        os._exit(EXIT_TIMEOUT)

    base_fields = fields
    t = threading.Timer(seconds, fire)
    t.daemon = True
    t.start()
    return t


def main(argv=None):
    args = build_parser().parse_args(argv)
    fields = {"busbw": None, "algbw": None, "transport": None, "pass_mark": args.pass_mark, "result": None}
    missing = [name for name, value in (("--rank", args.rank), ("--world-size", args.world_size),
                                        ("--master-addr", args.master_addr)) if value is None]
    if missing:
        say(f"missing {', '.join(missing)} (or RANK, WORLD_SIZE, MASTER_ADDR)")
        result_line(dict(fields, result="error", reason="missing-arguments"))
        return EXIT_ERROR
    if args.world_size < 2 or not 0 <= args.rank < args.world_size:
        say(f"need world size >= 2 and 0 <= rank < world size (rank {args.rank}, world size {args.world_size})")
        result_line(dict(fields, result="error", reason="bad-rank"))
        return EXIT_ERROR
    fields.update(rank=args.rank, world=args.world_size)
    watchdog = start_watchdog(args.timeout, fields)

    if args.env_file:
        loaded = load_env_file(args.env_file, args.env_format)
        os.environ.update(loaded)
        names = sorted(k for k in loaded if k.startswith(("NCCL_", "GLOO_", "TP_")))
        say(f"loaded {len(loaded)} variables from {args.env_file} ({', '.join(names) or 'no NCCL/Gloo names'})")
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            say(f"--env {item!r} is not KEY=VALUE")
            result_line(dict(fields, result="error", reason="bad-env"))
            return EXIT_ERROR
        os.environ[key] = value
    if args.env:
        say(f"set {', '.join(item.partition('=')[0] for item in args.env)} for this check")

    # NCCL reads its debug settings at initialisation: set them before torch starts NCCL.
    log_dir = tempfile.mkdtemp(prefix="nccl-check-")
    log_path = os.path.join(log_dir, f"nccl-rank{args.rank}.log")
    os.environ["NCCL_DEBUG"] = "INFO"
    os.environ["NCCL_DEBUG_SUBSYS"] = "INIT,NET"
    os.environ["NCCL_DEBUG_FILE"] = log_path

    try:
        import torch
        import torch.distributed as dist
    except ImportError as exc:
        say(f"{sys.executable} has no torch ({exc}): run the check with the runtime's own Python")
        result_line(dict(fields, result="error", reason="no-torch"))
        return EXIT_ERROR

    cuda = torch.cuda.is_available()
    backend = args.backend if args.backend != "auto" else ("nccl" if cuda else "gloo")
    if backend == "nccl" and not cuda:
        say("--backend nccl but torch sees no GPU")
        result_line(dict(fields, result="error", reason="no-gpu"))
        return EXIT_ERROR
    fields["backend"] = backend
    sizes = [parse_size(s) for s in (args.sizes or ("1M,16M,64M,256M" if backend == "nccl" else "1M,8M,32M")).split(",")]
    iters = args.iters or (20 if backend == "nccl" else 5)
    warmup = args.warmup if args.warmup is not None else (5 if backend == "nccl" else 1)

    local = local_address_towards(args.master_addr, args.master_port)
    if backend == "gloo" and not os.environ.get("GLOO_SOCKET_IFNAME"):
        iface = interface_of(local)
        if iface:
            os.environ["GLOO_SOCKET_IFNAME"] = iface
    host = args.master_addr if ":" not in args.master_addr else f"[{args.master_addr}]"
    device = torch.device("cuda", args.local_rank) if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(device)
        gpu = torch.cuda.get_device_name(device)
    else:
        gpu = "none (CPU tensors)"
    say(f"rank {args.rank}/{args.world_size} on {socket.gethostname()}: torch {torch.__version__}, backend {backend}, "
        f"device {device} ({gpu}), master {host}:{args.master_port}, local address {local or '?'}, "
        f"NCCL_SOCKET_IFNAME={os.environ.get('NCCL_SOCKET_IFNAME', '(unset)')} "
        f"GLOO_SOCKET_IFNAME={os.environ.get('GLOO_SOCKET_IFNAME', '(unset)')}")

    t0 = time.monotonic()
    say(f"joining the process group (up to {args.init_timeout:g}s for {args.world_size} ranks)")
    init = dict(backend=backend, init_method=f"tcp://{host}:{args.master_port}", rank=args.rank,
                world_size=args.world_size, timeout=datetime.timedelta(seconds=args.init_timeout))
    try:
        if backend == "nccl":
            try:  # eager NCCL init (torch >= 2.3): a broken fabric fails here, not in the first collective
                dist.init_process_group(**init, device_id=device)
            except TypeError:
                dist.init_process_group(**init)
        else:
            dist.init_process_group(**init)
    except Exception as exc:  # noqa: BLE001 - report any init failure the same way
        say(f"init_process_group failed after {time.monotonic() - t0:.1f}s: {type(exc).__name__}: {exc}")
        result_line(dict(fields, result="error", reason="init-failed"))
        return EXIT_ERROR
    say(f"process group ready in {time.monotonic() - t0:.1f}s")

    n = args.world_size
    factor = 2.0 * (n - 1) / n
    rows = []
    correct = True
    try:
        if args.rank == 0:
            say(f"{'size':>8} {'count':>10} {'iters':>5} {'time(us)':>12} {'algbw(GB/s)':>12} {'busbw(GB/s)':>12}")
        for nbytes in sizes:
            count = max(1, nbytes // 4)
            x = torch.empty(count, dtype=torch.float32, device=device)
            # Correctness first: every rank contributes rank+1, the sum is n(n+1)/2 everywhere.
            x.fill_(float(args.rank + 1))
            dist.all_reduce(x)
            expected = n * (n + 1) / 2
            got = [float(v) for v in (x[0], x[count // 2], x[-1])]
            if any(abs(v - expected) > 1e-3 * expected for v in got):
                correct = False
                say(f"WRONG SUM at {human(nbytes)}: expected {expected}, got {got}")
            for _ in range(warmup):
                dist.all_reduce(x)
            sync(torch, backend)
            # One timed call sets how many fit the size budget; the ranks agree on the smallest count.
            t = time.perf_counter()
            dist.all_reduce(x)
            sync(torch, backend)
            one = time.perf_counter() - t
            planned = torch.tensor([max(1, min(iters, int(args.size_budget / max(one, 1e-6))))],
                                   dtype=torch.int64, device=device)
            dist.all_reduce(planned, op=dist.ReduceOp.MIN)
            count_iters = int(planned.item())
            dist.barrier()
            sync(torch, backend)
            t = time.perf_counter()
            for _ in range(count_iters):
                dist.all_reduce(x)
            sync(torch, backend)
            elapsed = torch.tensor([(time.perf_counter() - t) / count_iters], dtype=torch.float64, device=device)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # nccl-tests: the slowest rank's time
            per = float(elapsed.item())
            algbw = count * 4 / per / 1e9
            busbw = algbw * factor
            rows.append((count * 4, per, algbw, busbw))
            if args.rank == 0:
                say(f"{human(count * 4):>8} {count:>10} {count_iters:>5} {per * 1e6:>12.1f} {algbw:>12.3f} {busbw:>12.3f}")
            del x
    except Exception as exc:  # noqa: BLE001
        say(f"all-reduce failed: {type(exc).__name__}: {exc}")
        result_line(dict(fields, result="error", reason="collective-failed"))
        return EXIT_ERROR

    if backend == "nccl":
        try:
            with open(log_path, encoding="utf-8", errors="replace") as fh:
                log = fh.read()
        except OSError:
            log = ""
        info = parse_nccl_log(log)
        for line in relevant_nccl_lines(log):
            say(f"NCCL: {line}")
        transport = info["transport"] or "unknown"
        fields["transports"] = ",".join(info["vias"]) or None
        fields["nccl"] = info["version"]
        if info["network"]:
            fields["network"] = info["network"]
        if transport == "unknown":
            say(f"no channel lines in the NCCL log ({log_path}): the transport is unknown")
    else:
        transport = "gloo/TCP"
        fields["iface"] = os.environ.get("GLOO_SOCKET_IFNAME") or None

    try:
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - the verdict is already measured
        pass
    if args.keep_log:
        say(f"NCCL log kept at {log_path}")
    else:
        try:
            os.remove(log_path)
        except OSError:
            pass
        try:
            os.rmdir(log_dir)
        except OSError:
            pass

    peak = max(rows, key=lambda r: r[3])
    avg = sum(r[3] for r in rows) / len(rows)
    reasons = []
    if not correct:
        reasons.append("wrong-sum")
    if peak[3] < args.pass_mark:
        reasons.append("below-pass-mark")
    if args.require_transport and not transport.startswith(args.require_transport):
        reasons.append(f"transport-not-{args.require_transport}")
    fields.update(busbw=peak[3], algbw=peak[2], transport=transport, size=human(peak[0]), avg_busbw=avg,
                  result="fail" if reasons else "pass", reason=",".join(reasons) or None,
                  seconds=f"{time.monotonic() - t0:.1f}")
    # Put the verdict keys first, the details after.
    ordered = {k: fields[k] for k in ("busbw", "algbw", "transport", "pass_mark", "result")}
    ordered.update({k: v for k, v in fields.items() if k not in ordered})
    watchdog.cancel()
    result_line(ordered)
    return EXIT_BELOW if reasons else EXIT_PASS


def sync(torch, backend):
    if backend == "nccl":
        torch.cuda.synchronize()


if __name__ == "__main__":
    sys.exit(main())
