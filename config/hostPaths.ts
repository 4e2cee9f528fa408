// Every name this project leaves on a host: files, directories, systemd units
// and containers. config/ (the checks that name a path), the renderers, the
// components, ops/ and the tests import them from here, so a name is written
// once. A leaf: it imports nothing.

/** Marker on the first lines of every file this project writes. */
export const MANAGED_MARKER = "Managed by spark-cluster (Pulumi). Local edits are overwritten.";

/** Backups of replaced files and recorded original state (PFC, MTU, nvidia-peermem). */
export const STATE_DIR = "/var/lib/spark-cluster";
/** Recorded PFC state per interface, put back by destroy. */
export const PFC_STATE_DIR = `${STATE_DIR}/pfc`;
/** The restart gates' state (render/watchdog.ts), one directory per unit; on tmpfs, so a boot starts afresh. */
export const GATE_STATE_DIR = "/run/spark-cluster/gate";
/** Our configuration directory: the runtime env file and the root-only secrets file. */
export const CONFIG_DIR = "/etc/spark-cluster";

export const NETPLAN_PATH = "/etc/netplan/60-spark-cluster-interconnect.yaml";
export const NCCL_CONF_PATH = "/etc/nccl.conf";
/** The EnvironmentFile of the Ray and vLLM units (NCCL, Gloo, TP names, VLLM_HOST_IP). */
export const RUNTIME_ENV_PATH = `${CONFIG_DIR}/runtime.env`;
/** Root-only env file with Ray's token authentication (RAY_AUTH_MODE, RAY_AUTH_TOKEN), read by the Ray and vLLM units. */
export const RAY_ENV_PATH = `${CONFIG_DIR}/ray.env`;
/** Root-only env file of Open WebUI: the API key, its admin's password and its session key, and its settings. */
export const OPEN_WEBUI_ENV_PATH = `${CONFIG_DIR}/open-webui.env`;
/**
 * The system user Open WebUI's venv runs as (not root): the data step creates it (its comment names
 * us) and owns the data directory to it; destroy gives the kept data back to root and removes it.
 */
export const OPEN_WEBUI_USER = "spark-openwebui";
/** The comment (GECOS) of {@link OPEN_WEBUI_USER}: how the data step knows the user is ours (no colon: passwd separates fields with it). */
export const OPEN_WEBUI_USER_COMMENT = "spark-cluster Open WebUI";
/** Root-only env file with the API key and HF token: never in argv, state or logs. */
export const VLLM_SECRETS_PATH = `${CONFIG_DIR}/vllm.env`;
/**
 * Root-only SGLang `--config` file (YAML) with the API key: SGLang takes the key only as `--api-key`
 * (serving.py:160 of 0.5.23, no environment variable), and `--config FILE.yaml` merges the file's
 * keys as flags inside the process, so the key is never in argv, ps or the journal.
 */
export const SGLANG_SECRETS_PATH = `${CONFIG_DIR}/sglang.yaml`;
/*
 * The variables the project itself writes into the runtime env file, the secrets files and the vLLM
 * unit, one list per place. The renderers name each through these lists (their types allow no
 * other name; NCCL variables from nccl.overrides aside), and model.env refuses every one of them
 * (PROJECT_ENV below).
 */
/** The variables of the runtime env file (components/render/nccl.ts renderRuntimeEnv). */
export const RUNTIME_ENV_NAMES = [
    "NCCL_SOCKET_IFNAME",
    "NCCL_IB_DISABLE",
    "NCCL_IB_HCA",
    "NCCL_IB_ROCE_VERSION_NUM",
    "NCCL_IB_ADDR_FAMILY",
    "NCCL_IB_TC",
    "NCCL_CROSS_NIC",
    "NCCL_P2P_DISABLE",
    "NCCL_SHM_DISABLE",
    "NCCL_PROTO",
    "NCCL_DEBUG",
    "GLOO_SOCKET_IFNAME",
    "TP_SOCKET_IFNAME",
    "VLLM_HOST_IP",
] as const;
export type RuntimeEnvName = (typeof RUNTIME_ENV_NAMES)[number];
/** The variables of the vLLM secrets file (the HF token is only the model download's: vLLM serves offline). */
export const VLLM_SECRET_NAMES = ["VLLM_API_KEY"] as const;
export type VllmSecretName = (typeof VLLM_SECRET_NAMES)[number];
/** The variables of Ray's token file. */
export const RAY_ENV_NAMES = ["RAY_AUTH_MODE", "RAY_AUTH_TOKEN"] as const;
export type RayEnvName = (typeof RAY_ENV_NAMES)[number];
/** The variables the vLLM unit sets itself (Environment=, or docker's -e). */
export const VLLM_UNIT_ENV_NAMES = ["RAY_ADDRESS", "HF_HUB_OFFLINE"] as const;
export type VllmUnitEnvName = (typeof VLLM_UNIT_ENV_NAMES)[number];
export const PEERMEM_CONF = "/etc/modules-load.d/nvidia-peermem.conf";
/** IPv4 forwarding on a ring node's interconnect interfaces, applied again at boot by systemd-sysctl. */
export const FORWARDING_SYSCTL_PATH = "/etc/sysctl.d/60-spark-cluster-forwarding.conf";
/** The forwarding flags found before we set them, one file per interface. */
export const FORWARDING_STATE_DIR = `${STATE_DIR}/forwarding`;
/** Prometheus's configuration on the head (metrics.enabled): what it scrapes. */
export const PROMETHEUS_CONFIG_PATH = `${CONFIG_DIR}/prometheus.yml`;
/** Prometheus's samples on the head: its unit's StateDirectory=, so systemd makes it and hands it to the prometheus user. */
export const PROMETHEUS_DATA_DIR = `${STATE_DIR}/prometheus`;
/** The nftables ruleset of our table, loaded by the firewall unit at boot. */
export const FIREWALL_RULES_PATH = `${CONFIG_DIR}/firewall.nft`;

/** The host's Hugging Face home: the directory every container of ours bind-mounts, and root's default. */
export const HF_HOME_DIR = "/root/.cache/huggingface";
/** The hub cache under it: one `models--ORG--NAME` directory per repository (blobs/, snapshots/, refs/). */
export const HF_HUB_DIR = `${HF_HOME_DIR}/hub`;

export const UNIT_DIR = "/etc/systemd/system";
/** Our systemd units, without `.service`. */
export const UNITS = {
    ray: "spark-cluster-ray",
    vllm: "spark-cluster-vllm",
    /** On a headless rank (mp executor): restarts the vLLM unit when the head's engine ends. */
    vllmFollow: "spark-cluster-vllm-follow",
    sglang: "spark-cluster-sglang",
    /** On a rank 1+ of SGLang: restarts the SGLang unit when the head's engine ends. */
    sglangFollow: "spark-cluster-sglang-follow",
    pfc: "spark-cluster-pfc",
    firewall: "spark-cluster-firewall",
    /** The health watchdog of the vLLM unit on the head (watchdog.enabled). */
    vllmWatchdog: "spark-cluster-vllm-watchdog",
    /** The health watchdog of the SGLang unit on the head. */
    sglangWatchdog: "spark-cluster-sglang-watchdog",
    /** The health watchdog of Ray's head (its dashboard's GCS health check). */
    rayWatchdog: "spark-cluster-ray-watchdog",
    /** Open WebUI on the head (frontend.openWebui). */
    openWebui: "spark-cluster-open-webui",
    /** The health watchdog of Open WebUI (its /health). */
    openWebuiWatchdog: "spark-cluster-open-webui-watchdog",
    /** Prometheus's node_exporter on every node (metrics.enabled). */
    nodeExporter: "spark-cluster-node-exporter",
    /** Prometheus on the head (metrics.enabled). */
    prometheus: "spark-cluster-prometheus",
} as const;
/** Every variable the project sets for the vLLM process, with where it is set: model.env refuses these names. */
export const PROJECT_ENV: ReadonlyMap<string, string> = new Map<string, string>([
    ...RUNTIME_ENV_NAMES.map((name) => [name, RUNTIME_ENV_PATH] as const),
    ...VLLM_SECRET_NAMES.map((name) => [name, VLLM_SECRETS_PATH] as const),
    ...RAY_ENV_NAMES.map((name) => [name, RAY_ENV_PATH] as const),
    ...VLLM_UNIT_ENV_NAMES.map((name) => [name, `the unit ${UNITS.vllm}.service`] as const),
    ["HF_TOKEN", "hfToken, for the model download only: vLLM serves offline"],
]);
/** The variables of Open WebUI's env file that hold a secret (the API key, its session key, its admin's password). */
export const OPEN_WEBUI_SECRET_NAMES = ["OPENAI_API_KEYS", "WEBUI_SECRET_KEY", "WEBUI_ADMIN_PASSWORD"] as const;
/**
 * Every file of ours on a node that holds a secret of the stack, with the keys whose values are
 * secrets (`KEY=value` env files, and SGLang's YAML `key: "value"`): what a journal tail we print is
 * scrubbed of (components/render/host/journal.ts).
 */
export const SECRET_FILES: readonly { path: string; keys: readonly string[] }[] = [
    // HF_TOKEN too: a file written before the token left it is scrubbed until it is rewritten.
    { path: VLLM_SECRETS_PATH, keys: [...VLLM_SECRET_NAMES, "HF_TOKEN"] },
    { path: RAY_ENV_PATH, keys: ["RAY_AUTH_TOKEN"] },
    { path: OPEN_WEBUI_ENV_PATH, keys: OPEN_WEBUI_SECRET_NAMES },
    { path: SGLANG_SECRETS_PATH, keys: ["api-key"] },
];
/** Container names of our units (docker runtime), so ExecStop and `docker exec` find them. */
export const CONTAINER_NAMES = {
    ray: "spark-cluster-ray",
    vllm: "spark-cluster-vllm",
    sglang: "spark-cluster-sglang",
    openWebui: "spark-cluster-open-webui",
} as const;

export function unitPath(name: string): string {
    return `${UNIT_DIR}/${name}.service`;
}

/**
 * Our units that listen on the network (the engines' ranks, Ray, Open WebUI, the metrics units):
 * while the firewall is on, each gets a drop-in of the firewall layer that orders it after the
 * firewall unit and keeps it from starting without it.
 */
export const FIREWALLED_UNITS = [UNITS.ray, UNITS.vllm, UNITS.sglang, UNITS.openWebui, UNITS.nodeExporter, UNITS.prometheus] as const;

/** The drop-in directory of a unit. */
export function dropInDir(unit: string): string {
    return `${UNIT_DIR}/${unit}.service.d`;
}

/** The firewall layer's drop-in for one of {@link FIREWALLED_UNITS}. */
export function firewallDropInPath(unit: string): string {
    return `${dropInDir(unit)}/50-spark-cluster-firewall.conf`;
}

/** What the take-over (interconnect.takeOver) moved aside: other tools' netplan files, NetworkManager's active profiles. */
export const TAKEOVER_STATE_DIR = `${STATE_DIR}/takeover`;
/** Our NetworkManager drop-in (interconnect.takeOver): NetworkManager leaves the interconnect's ports alone. */
export const NM_UNMANAGED_CONF = "/etc/NetworkManager/conf.d/60-spark-cluster-interconnect.conf";
