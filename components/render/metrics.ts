// The metrics layer (metrics.enabled): Prometheus's node_exporter on every node and Prometheus on
// the head, both the nodes' own packages (Debian's and Ubuntu's `prometheus-node-exporter` 1.5+
// and `prometheus` 2.42+), run by units of ours on ports of their own as the packages' user
// `prometheus`. The packages' own services, where they run, are not ours and are left as they are.
//   - node_exporter listens on the node's cluster address, which the firewall keeps to the
//     members; unified memory is its `node_memory_MemAvailable_bytes` (from /proc/meminfo: NVML
//     reports a GB10's memory as N/A).
//   - Prometheus listens on the head's loopback (reached through the SSH tunnel the `metrics`
//     output prints) and scrapes every exporter and the engine's `/metrics` (vLLM's are on by
//     default; SGLang's with --enable-metrics), keeping `retentionDays` days or `retentionGiB`.
import * as yaml from "js-yaml";
import type { MetricsConfig } from "../../config";
import { CONFIG_DIR, MANAGED_MARKER, PROMETHEUS_CONFIG_PATH, PROMETHEUS_DATA_DIR, UNITS, unitPath } from "../../config/hostPaths";
import { removeDirLines, removeUnitScript, unitInstallLines, unitRemoveLines } from "./host/files";
import { HOST_LIB } from "./host/lib";
import { fileDriftLine, readScript, unitDriftLine, unitReadScript } from "./host/read";
import { bashScript, contentHash, heredoc } from "./host/shell";
import { systemdJoin, systemdText } from "./host/systemd";
import type { StepScripts } from "./step";
import { journalTailLine } from "./host/journal";

/** Where both packages install their binaries, and the user they create. */
export const NODE_EXPORTER_BIN = "/usr/bin/prometheus-node-exporter";
export const PROMETHEUS_BIN = "/usr/bin/prometheus";
export const METRICS_USER = "prometheus";

/** One node_exporter: its node and the address and port it listens on. */
export interface ExporterSpec {
    node: string;
    address: string;
    port: number;
}

/** Prometheus on the head: what it scrapes, and how long it keeps it. */
export interface PrometheusSpec {
    node: string;
    metrics: MetricsConfig;
    exporters: readonly ExporterSpec[];
    /** The engine's API on the head (`host:port`, as a probe on the head asks it) and its name; undefined while paused. */
    engine?: { target: string; name: string };
}

/** A unit that runs one of the packages' binaries as their user, restarted whatever ends it. */
function renderMetricsUnit(description: string, argv: readonly string[], extra: readonly string[] = []): string {
    return (
        [
            `# ${MANAGED_MARKER}`,
            "[Unit]",
            `Description=${systemdText(description)}`,
            "Wants=network-online.target",
            "After=network-online.target",
            "StartLimitIntervalSec=0",
            "",
            "[Service]",
            "Type=simple",
            `User=${METRICS_USER}`,
            "NoNewPrivileges=yes",
            ...extra,
            `ExecStart=${systemdJoin(argv)}`,
            // The cluster address appears with the interconnect: until then the exporter cannot bind.
            "Restart=always",
            "RestartSec=5",
            "",
            "[Install]",
            "WantedBy=multi-user.target",
        ].join("\n") + "\n"
    );
}

/** node_exporter's unit: on the node's cluster address only. */
export function renderExporterUnit(spec: ExporterSpec): string {
    return renderMetricsUnit(`spark-cluster: node_exporter of ${spec.node} on ${spec.address}:${spec.port}`, [
        NODE_EXPORTER_BIN,
        `--web.listen-address=${spec.address}:${spec.port}`,
    ]);
}

/** Prometheus's configuration: every exporter (labelled with its node) and the engine's API. */
export function renderPrometheusConfig(spec: PrometheusSpec): string {
    const config = {
        global: { scrape_interval: `${spec.metrics.scrapeSeconds}s`, scrape_timeout: `${Math.min(10, spec.metrics.scrapeSeconds)}s` },
        scrape_configs: [
            {
                job_name: "node",
                static_configs: spec.exporters.map((e) => ({ targets: [`${e.address}:${e.port}`], labels: { node: e.node } })),
            },
            ...(spec.engine !== undefined
                ? [
                      {
                          job_name: "engine",
                          metrics_path: "/metrics",
                          static_configs: [{ targets: [spec.engine.target], labels: { node: spec.node, engine: spec.engine.name } }],
                      },
                  ]
                : []),
        ],
    };
    return `# ${MANAGED_MARKER}\n# What Prometheus on ${spec.node} scrapes (metrics.enabled).\n` + yaml.dump(config, { lineWidth: -1, noRefs: true });
}

/** Prometheus's argv: our configuration and data directory, the retention, the head's loopback. */
export function prometheusArgv(spec: PrometheusSpec): string[] {
    return [
        PROMETHEUS_BIN,
        `--config.file=${PROMETHEUS_CONFIG_PATH}`,
        `--storage.tsdb.path=${PROMETHEUS_DATA_DIR}`,
        `--storage.tsdb.retention.time=${spec.metrics.retentionDays}d`,
        // Prometheus's units are powers of 1024: 2GB is 2 GiB.
        `--storage.tsdb.retention.size=${spec.metrics.retentionGiB}GB`,
        `--web.listen-address=127.0.0.1:${spec.metrics.port}`,
    ];
}

/** Prometheus's unit; its configuration's hash is in it, so a changed configuration restarts it. */
export function renderPrometheusUnit(spec: PrometheusSpec): string {
    const unit = renderMetricsUnit(`spark-cluster: Prometheus on ${spec.node} (127.0.0.1:${spec.metrics.port})`, prometheusArgv(spec), [
        // systemd makes the data directory and gives it to the user (StateDirectory= is relative to /var/lib).
        `StateDirectory=${PROMETHEUS_DATA_DIR.replace(/^\/var\/lib\//, "")}`,
    ]);
    return unit.replace("[Unit]\n", `# input config: ${contentHash(renderPrometheusConfig(spec))}\n[Unit]\n`);
}

/** Stops the step before anything changes when a package is missing: the node check asks for them first, this says it again. */
function requireLines(binary: string, pkg: string, node: string): string[] {
    return [
        `[ -x ${binary} ] || { echo "${pkg} is not installed on ${node} (${binary}): apt-get install ${pkg}, or set spark-cluster:metrics.enabled to false" >&2; exit 1; }`,
        `id -u ${METRICS_USER} >/dev/null 2>&1 || { echo "the user ${METRICS_USER} (made by the ${pkg} package) is missing on ${node}: apt-get install --reinstall ${pkg}" >&2; exit 1; }`,
    ];
}

/** The exporter's step on one node: its unit, started and checked; removed; read back. */
export function exporterStep(spec: ExporterSpec): StepScripts {
    const unit = renderExporterUnit(spec);
    return {
        create: bashScript([
            ...requireLines(NODE_EXPORTER_BIN, "prometheus-node-exporter", spec.node),
            HOST_LIB,
            ...unitInstallLines(UNITS.nodeExporter, unit),
        ]),
        delete: removeUnitScript(UNITS.nodeExporter),
        read: unitReadScript(UNITS.nodeExporter, unit),
    };
}

/** Prometheus's step on the head: its configuration and unit, started; its samples removed with it; read back. */
export function prometheusStep(spec: PrometheusSpec): StepScripts {
    const config = renderPrometheusConfig(spec);
    const unit = renderPrometheusUnit(spec);
    return {
        create: bashScript([
            ...requireLines(PROMETHEUS_BIN, "prometheus", spec.node),
            HOST_LIB,
            heredoc(`sc_install_file ${PROMETHEUS_CONFIG_PATH} 644`, config),
            ...unitInstallLines(UNITS.prometheus, unit),
            // Ready: it answers on loopback (the unit being active does not say it read its configuration).
            `if ! sc_wait 60 "Prometheus to answer on 127.0.0.1:${spec.metrics.port}" curl -fsS -o /dev/null --max-time 5 http://127.0.0.1:${spec.metrics.port}/-/ready; then`,
            `  ${journalTailLine(UNITS.prometheus, 30)}`,
            `  exit 1`,
            `fi`,
            `echo "Prometheus on ${spec.node} answers on 127.0.0.1:${spec.metrics.port}, scraping ${spec.exporters.length} exporter(s)${spec.engine ? ` and the engine` : ""}"`,
        ]),
        delete: bashScript([
            HOST_LIB,
            ...unitRemoveLines(UNITS.prometheus),
            `sc_remove_file ${PROMETHEUS_CONFIG_PATH}`,
            ...removeDirLines(PROMETHEUS_DATA_DIR),
            `rmdir ${CONFIG_DIR} 2>/dev/null || true`,
            "sc_cleanup_state",
        ]),
        read: readScript([
            fileDriftLine(PROMETHEUS_CONFIG_PATH, "644", config),
            fileDriftLine(unitPath(UNITS.prometheus), "644", unit),
            unitDriftLine(UNITS.prometheus),
        ]),
    };
}
