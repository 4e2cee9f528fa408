"""Ray actor standing in for one vLLM GPU worker (one per placement-group bundle). Imported only
by the Ray executor: `import ray` must not happen for mp/uni (images without Ray)."""

import os
import socket

import ray


@ray.remote(max_restarts=0)
class ShardWorker:
    def __init__(self, rank):
        self.rank = rank
        self.steps = 0

    def info(self):
        return {
            "rank": self.rank,
            "hostname": socket.gethostname(),
            "ip": ray.util.get_node_ip_address(),
            "node_id": ray.get_runtime_context().get_node_id(),
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "pid": os.getpid(),
        }

    def ping(self):
        return self.rank

    def step(self):
        self.steps += 1
        return self.steps
