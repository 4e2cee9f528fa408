/**
 * Metrics (metrics.enabled, issue 36): the config (off by default, its ports in the collision
 * rule, the SSH tunnel output), the renderers (node_exporter's and Prometheus's units, Prometheus's
 * configuration read back by js-yaml, the scripts valid bash), SGLang's --enable-metrics, and
 * `status`'s load line: the node's Python probe run here against a loopback server that answers
 * /metrics as vLLM 0.31's PrometheusStatLogger prints it.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import * as yaml from "js-yaml";
import { ConfigError, parseConfig } from "../../config";
import { PROMETHEUS_CONFIG_PATH, PROMETHEUS_DATA_DIR, UNITS } from "../../config/hostPaths";
import { engineStrategy } from "../../components/render/engine";
import {
    exporterStep,
    prometheusArgv,
    prometheusStep,
    renderExporterUnit,
    renderPrometheusConfig,
    renderPrometheusUnit,
    type PrometheusSpec,
} from "../../components/render/metrics";
import { engineApiProbePython, judgeNode, parseNodeReport, statusExpectations, statusRow } from "../../ops/status";
import { sparkPair } from "../support/fixtures";

const API_KEY = "metrics-test-api-key-0123456789abcdef";
const SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nmetrics-test-key\n-----END OPENSSH PRIVATE KEY-----";

function pair(extra: Record<string, unknown> = {}, model: Record<string, unknown> = {}, nodes: Record<string, unknown>[] = sparkPair()) {
    return parseConfig({
        values: {
            nodes,
            interconnect: { topology: "pair", mtu: 9000 },
            model: { source: "Qwen/Qwen2.5-7B-Instruct", servedName: "qwen", executor: "mp", ...model },
            sshPrivateKey: SSH_KEY,
            apiKey: API_KEY,
            ...extra,
        },
        secretKeys: new Set(["sshPrivateKey", "apiKey"]),
    });
}

function bashN(script: string): number | null {
    return spawnSync("bash", ["-n"], { input: script }).status;
}

const on = pair({ metrics: { enabled: true } });
const metrics = on.metrics ?? assert.fail("metrics.enabled gives config.metrics");
const spec: PrometheusSpec = {
    node: "spark-a",
    metrics,
    exporters: on.nodes.map((n) => ({ node: n.name, address: n.ip, port: metrics.exporterPort })),
    engine: { target: "127.0.0.1:8000", name: "vllm" },
};

describe("metrics: config", () => {
    it("off by default; on: ports 9101 and 9190, 15 s scrapes, 15 days or 2 GiB, and the SSH tunnel to the head's loopback", () => {
        assert.equal(pair().metrics, undefined);
        assert.equal(pair().model.enableMetrics, undefined);
        assert.deepEqual(metrics, {
            exporterPort: 9101,
            port: 9190,
            scrapeSeconds: 15,
            retentionDays: 15,
            retentionGiB: 2,
            access: `ssh -N -L 9190:127.0.0.1:9190 root@${on.head.ssh.host}, then open http://localhost:9190`,
        });
        assert.equal(on.model.enableMetrics, true);
    });

    it("a metrics port that collides with another port of the cluster is refused, naming both keys", () => {
        assert.throws(
            () => pair({ metrics: { enabled: true, port: 8000 } }),
            (e: unknown) => e instanceof ConfigError && /metrics\.port.*collides with model\.apiPort/s.test(e.message),
        );
        assert.throws(
            () => pair({ metrics: { enabled: true, exporterPort: 6379 } }),
            (e: unknown) => e instanceof ConfigError && /metrics\.exporterPort.*collides with ray\.port/s.test(e.message),
        );
        // Off, its ports are not the cluster's.
        assert.equal(pair({ metrics: { enabled: false, port: 8000 } }).metrics, undefined);
        assert.throws(() => pair({ metrics: { enabled: true, retentionDays: 0 } }), /metrics\.retentionDays/);
    });
});

describe("metrics: what the nodes get", () => {
    it("node_exporter: the packaged binary as its user, on the node's cluster address only", () => {
        const unit = renderExporterUnit({ node: "spark-b", address: "192.168.100.12", port: 9101 });
        assert.match(unit, /^User=prometheus$/m);
        assert.match(unit, /^ExecStart=\/usr\/bin\/prometheus-node-exporter --web\.listen-address=192\.168\.100\.12:9101$/m);
        assert.match(unit, /^Restart=always$/m);
        const step = exporterStep({ node: "spark-b", address: "192.168.100.12", port: 9101 });
        for (const script of [step.create, step.delete, step.read ?? ""]) assert.equal(bashN(script), 0);
        assert.match(step.create, /apt-get install prometheus-node-exporter, or set spark-cluster:metrics\.enabled to false/);
        assert.match(step.delete, new RegExp(`systemctl disable --now ${UNITS.nodeExporter}\\.service`));
    });

    it("Prometheus: our configuration, its samples, the retention, the head's loopback; a changed configuration changes the unit", () => {
        assert.deepEqual(prometheusArgv(spec), [
            "/usr/bin/prometheus",
            `--config.file=${PROMETHEUS_CONFIG_PATH}`,
            `--storage.tsdb.path=${PROMETHEUS_DATA_DIR}`,
            "--storage.tsdb.retention.time=15d",
            "--storage.tsdb.retention.size=2GB",
            "--web.listen-address=127.0.0.1:9190",
        ]);
        const unit = renderPrometheusUnit(spec);
        assert.match(unit, /^StateDirectory=spark-cluster\/prometheus$/m);
        assert.match(unit, /^User=prometheus$/m);
        assert.notEqual(renderPrometheusUnit({ ...spec, engine: undefined }), unit, "the configuration's hash is in the unit");
        const step = prometheusStep(spec);
        for (const script of [step.create, step.delete, step.read ?? ""]) assert.equal(bashN(script), 0);
        assert.match(step.create, /\/-\/ready/);
        assert.match(step.delete, new RegExp(`rm -rf ${PROMETHEUS_DATA_DIR}`));
    });

    it("Prometheus's configuration, read back by js-yaml: every exporter with its node, and the engine's /metrics", () => {
        const text = renderPrometheusConfig(spec);
        assert.match(text, /^# Managed by spark-cluster/);
        assert.deepEqual(yaml.load(text), {
            global: { scrape_interval: "15s", scrape_timeout: "10s" },
            scrape_configs: [
                {
                    job_name: "node",
                    static_configs: [
                        { targets: [`${on.nodes[0].ip}:9101`], labels: { node: "spark-a" } },
                        { targets: [`${on.nodes[1].ip}:9101`], labels: { node: "spark-b" } },
                    ],
                },
                {
                    job_name: "engine",
                    metrics_path: "/metrics",
                    static_configs: [{ targets: ["127.0.0.1:8000"], labels: { node: "spark-a", engine: "vllm" } }],
                },
            ],
        });
        // Paused: no engine to scrape.
        assert.equal((yaml.load(renderPrometheusConfig({ ...spec, engine: undefined })) as { scrape_configs: unknown[] }).scrape_configs.length, 1);
    });

    it("SGLang serves /metrics only with --enable-metrics: rank 0 gets it when metrics are on; vLLM's argv is unchanged", () => {
        const venv = sparkPair().map((n) => ({ ...n, runtime: { kind: "venv", path: "/opt/sglang-venv" } }));
        const sglang = (extra: Record<string, unknown>) => pair(extra, { engine: "sglang" }, venv);
        const argv = (config: ReturnType<typeof pair>) => engineStrategy(config.engine).serveArgv(config.model, config.executor.servers[0]);
        assert.ok(argv(sglang({ metrics: { enabled: true } })).includes("--enable-metrics"));
        assert.ok(!argv(sglang({})).includes("--enable-metrics"));
        assert.deepEqual(argv(on), argv(pair()));
    });
});

describe("metrics: status", () => {
    it("every node must run node_exporter, the head Prometheus too", () => {
        assert.deepEqual(
            statusExpectations(on).map((e) => e.mustRun),
            [
                [UNITS.vllm, UNITS.nodeExporter, UNITS.prometheus],
                [UNITS.vllm, UNITS.vllmFollow, UNITS.nodeExporter],
            ],
        );
    });

    it("the head's probe reads the requests running and waiting and the KV cache's use from /metrics (run here against a loopback server)", async () => {
        // vLLM 0.31's text format: HELP/TYPE lines, one sample per served name, a counter beside.
        const body = [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            'vllm:num_requests_running{engine="0",model_name="qwen"} 2.0',
            "# TYPE vllm:num_requests_waiting gauge",
            'vllm:num_requests_waiting{engine="0",model_name="qwen"} 1.0',
            "# TYPE vllm:kv_cache_usage_perc gauge",
            'vllm:kv_cache_usage_perc{engine="0",model_name="qwen"} 0.125',
            'vllm:num_requests_running_total{model_name="qwen"} 99.0',
            "",
        ].join("\n");
        const server = http.createServer((req, res) => {
            res.writeHead(req.url === "/metrics" || req.url === "/health" ? 200 : 404);
            res.end(req.url === "/metrics" ? body : "");
        });
        await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
        try {
            const port = (server.address() as AddressInfo).port;
            const [head] = statusExpectations(on);
            const child = spawn("python3", ["-c", engineApiProbePython(head, port)], { stdio: ["ignore", "pipe", "pipe"] });
            let out = "";
            child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
            const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
            assert.equal(code, 0);
            assert.match(out, /^api health 200$/m);
            assert.match(out, /^api load \{"running": 2\.0, "waiting": 1\.0, "kvCache": 0\.125\}$/m);
            const report = parseNodeReport(out);
            assert.deepEqual(report.load, { running: 2, waiting: 1, kvCache: 0.125 });
            assert.match(statusRow(judgeNode(head, report))[3], /; 2 running, 1 waiting, KV cache 13%$/);
        } finally {
            server.close();
        }
    });
});
