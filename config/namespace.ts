// Names every part of the config shares.

/** The stack-config namespace every key of this project lives under. */
export const CONFIG_NAMESPACE = "spark-cluster";

/** The container image used when a node's docker runtime names none (seeds 000, 001, 003). */
export const DEFAULT_VLLM_IMAGE = "nvcr.io/nvidia/vllm:25.09-py3";
