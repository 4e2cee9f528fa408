// Names every part of the config shares.

/** The stack-config namespace every key of this project lives under. */
export const CONFIG_NAMESPACE = "spark-cluster";

/**
 * The container image used when a node's docker runtime names none: the newest NGC vLLM release
 * whose notes we can cite (docs.nvidia.com, "vLLM Release 26.10": vLLM 0.31.0, Torch 2.15, no Ray).
 * Its vLLM runs the default mp executor across nodes; the ray executor needs an image with Ray.
 */
export const DEFAULT_VLLM_IMAGE = "nvcr.io/nvidia/vllm:26.10-py3";
