// Open WebUI (frontend.openWebui) on the lab's Spark pair, through the real Pulumi CLI over real
// SSH: the real Open WebUI 0.12.4 from PyPI on the head (the lab's layer /opt/lab-open-webui, built
// by lab/lib/image.sh without the torch family: lab/README.md "Open WebUI"), the lab stack's vLLM
// stand-in behind it. A real headless Chromium (Debian's, scripts/chromium.sh) opens the page
// through the SSH tunnel the `openWebui` output gives, signs in as the configured admin, picks the
// served model, sends a message and reads the cluster's answer on the page; the screenshot is kept
// (test-artifacts/open-webui/chat.png, or $SPARK_TEST_ARTIFACTS/open-webui/). Neither the API key,
// the admin password nor Open WebUI's session key is in the page, the state, the journal, a
// process's argv or any file of ours a non-root user can read. A second `up` changes nothing; the
// outsider cannot reach the page until listenAddress 0.0.0.0 opens its port; destroy removes the
// unit and its watchdog's, the env file and (removeDataOnDestroy) the data, and leaves the lab's venv
// (not created by `up`). Frozen by `kill -STOP`, Open WebUI is restarted by its watchdog (issue 36).
// The same stack has metrics on (issue 36): Debian's real Prometheus 2.42 and node_exporter 1.5
// (installed in the lab's Sparks as their owner would: lab/README.md) answer a query for the
// engine's running requests and each node's available memory; the outsider reaches neither;
// destroy removes our units, configuration and samples and leaves the packages.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { OPEN_WEBUI_ENV_PATH, OPEN_WEBUI_USER, PROMETHEUS_CONFIG_PATH, PROMETHEUS_DATA_DIR, UNITS, unitPath } from "../../config/hostPaths";
import { SECRET_PURPOSES } from "../../components/clusterSecrets";
import { keyPath, sleep, sshOpts, withLabUp } from "../lab/lab-harness";
import { chatThroughPage, chromiumPath } from "./openWebuiBrowser";
import {
    Session,
    apiKeyOf,
    derivedSecretOf,
    newSession,
    nodes,
    pulumi,
    pulumiWithConfig,
    removeSession,
    root,
    secondsFrozenUntil,
    setConfig,
    ssh,
} from "./stackSession";

const PASSWORD = "lab-Open-WebUI-admin-password-7";
const EMAIL = "admin@example.com";
const DATA_DIR = "/var/lib/spark-cluster-open-webui";
const VENV = "/opt/lab-open-webui";
const PORT = 8080;
/** The local end of the test's tunnel (8080 on this machine may be taken). */
const LOCAL_PORT = 18080;
const MODEL = "tiny-chat";
const MESSAGE = "Hello from the Open WebUI lab test";
/** metrics: the schema's defaults, written out so the test reads them here. */
const PROMETHEUS_PORT = 9190;
const EXPORTER_PORT = 9101;
const ARTIFACTS = path.join(process.env["SPARK_TEST_ARTIFACTS"] ?? path.join(root, "test-artifacts"), "open-webui");

withLabUp();

/** The lab stack with Open WebUI on, from the lab's venv layer, its data removed by destroy; and metrics on. */
function withOpenWebui(config: string): string {
    const at = config.indexOf("  spark-cluster:apiKey:");
    assert.ok(at > 0, "the lab stack has its apiKey under config:");
    const frontend = [
        "  spark-cluster:frontend:",
        "    openWebui:",
        "      enabled: true",
        `      adminEmail: ${EMAIL}`,
        `      runtime: {kind: venv, path: ${VENV}}`,
        "      removeDataOnDestroy: true",
        // Metrics on the same bring-up (issue 36): Prometheus on the head, node_exporter on both.
        "  spark-cluster:metrics:",
        "    enabled: true",
        `    port: ${PROMETHEUS_PORT}`,
        `    exporterPort: ${EXPORTER_PORT}`,
        "    scrapeSeconds: 5",
        "",
    ].join("\n");
    return config.slice(0, at) + frontend + config.slice(at);
}

function portOpen(port: number): Promise<boolean> {
    return new Promise((resolve) => {
        const socket = net.connect({ host: "127.0.0.1", port }, () => {
            socket.destroy();
            resolve(true);
        });
        socket.on("error", () => resolve(false));
        socket.setTimeout(2000, () => {
            socket.destroy();
            resolve(false);
        });
    });
}

describe("Open WebUI on the lab's Spark pair, in a real Chromium", { timeout: 30 * 60_000 }, () => {
    let session: Session;
    let apiKey = "";
    let tunnel: ChildProcess | undefined;
    const secrets = (): [string, string][] => [
        ["the API key", apiKey],
        ["the admin password", PASSWORD],
        ["Open WebUI's session key", derivedSecretOf(session, SECRET_PURPOSES.openWebuiSessionKey)],
    ];

    before(() => {
        session = newSession(withOpenWebui);
        pulumiWithConfig(session, "config", "set", "--secret", "spark-cluster:openWebuiAdminPassword", PASSWORD);
        apiKey = apiKeyOf(session);
        const started = Date.now();
        pulumiWithConfig(session, "up", "--yes", "--skip-preview");
        console.log(`pulumi up with Open WebUI: ${Math.round((Date.now() - started) / 1000)} s`);
    });

    after(() => {
        if (tunnel?.pid !== undefined && tunnel.exitCode === null) tunnel.kill("SIGTERM");
        if (session) removeSession(session);
    });

    it("runs on the head's loopback only; the output gives the SSH tunnel", () => {
        const output = pulumi(session, "stack", "output", "openWebui").trim();
        assert.equal(output, `ssh -N -L ${PORT}:127.0.0.1:${PORT} root@${nodes["spark-a"]}, then open http://localhost:${PORT}`);
        assert.equal(ssh("spark-a", `systemctl is-active ${UNITS.openWebui}.service`).trim(), "active");
        const listening = ssh("spark-a", `ss -Hltn 'sport = :${PORT}' | awk '{print $4}'`).trim().split("\n");
        assert.deepEqual(listening, [`127.0.0.1:${PORT}`]);
        assert.equal(
            ssh("spark-b", `systemctl list-unit-files ${UNITS.openWebui}.service | grep -c ${UNITS.openWebui} || true`).trim(),
            "0",
            "only on the head",
        );
        // The outsider: nothing answers on the port (loopback, and the firewall opens nothing for it).
        const fromOutsider = ssh(
            "outsider",
            `timeout 3 bash -c 'exec 3<>/dev/tcp/${nodes["spark-a"]}/${PORT}' 2>/dev/null && echo open || echo refused`,
        ).trim();
        assert.equal(fromOutsider, "refused");
        assert.match(ssh("spark-a", `${VENV}/bin/python -c 'import importlib.metadata as m; print(m.version("open-webui"))'`), /^0\.12\.4$/m);
    });

    it("a headless Chromium signs in as the admin, picks the served model, and shows the cluster's answer", async (t) => {
        tunnel = spawn("ssh", ["-i", keyPath, ...sshOpts, "-N", "-L", `${LOCAL_PORT}:127.0.0.1:${PORT}`, `root@${nodes["spark-a"]}`], { stdio: "ignore" });
        let open = false;
        for (let attempt = 0; attempt < 30 && !open; attempt++) {
            open = await portOpen(LOCAL_PORT);
            if (!open) await sleep(1000);
        }
        assert.ok(open, `the SSH tunnel to Open WebUI (127.0.0.1:${LOCAL_PORT}) did not open in 30 s`);
        fs.mkdirSync(ARTIFACTS, { recursive: true });
        const screenshot = path.join(ARTIFACTS, "chat.png");
        const browserPath = chromiumPath(root);
        const result = await chatThroughPage({
            browserPath,
            baseUrl: `http://127.0.0.1:${LOCAL_PORT}`,
            email: EMAIL,
            password: PASSWORD,
            model: MODEL,
            message: MESSAGE,
            // The stand-in's answer ends with the message it echoes: the whole answer arrived.
            expect: ["served by spark-a,spark-b", MESSAGE],
            screenshot,
        });
        t.diagnostic(`answer on the page after ${result.answerSeconds} s: ${result.answer}`);
        t.diagnostic(`screenshot: ${screenshot}`);
        assert.match(result.answer, /LAB STAND-IN tiny-chat: served by spark-a,spark-b/);
        assert.ok(result.answer.includes(MESSAGE), "the answer echoes the message sent from the page");
        assert.ok(fs.statSync(screenshot).size > 10_000, "a screenshot of the page");
        fs.writeFileSync(path.join(ARTIFACTS, "page.html"), result.html);
        for (const [what, secret] of secrets()) assert.ok(!result.html.includes(secret), `${what} in the page source`);
        tunnel.kill("SIGTERM");
    });

    it("no secret in the state, the journal, argv, or any file of ours a non-root user can read", () => {
        const state = pulumi(session, "stack", "export");
        for (const [what, secret] of secrets()) {
            assert.ok(!state.includes(secret), `${what} in pulumi stack export`);
            assert.ok(!state.includes(JSON.stringify(secret).slice(1, -1)), `${what} (JSON-escaped) in pulumi stack export`);
        }
        const env = ssh("spark-a", `stat -c '%a %U %G' ${OPEN_WEBUI_ENV_PATH}`).trim();
        assert.equal(env, "600 root root");
        // Every file of ours other users can read, the data directory's mode, argv and the journal.
        const readable = ssh(
            "spark-a",
            `find /etc/spark-cluster /etc/systemd/system ${DATA_DIR} -maxdepth 3 -type f -perm -o=r 2>/dev/null | sort; echo "--- data dir"; stat -c '%a' ${DATA_DIR}`,
        );
        assert.ok(readable.includes(unitPath(UNITS.openWebui)), "the unit is readable (and must hold no secret)");
        assert.match(readable, /--- data dir\n700\n?$/);
        const files = readable.split("--- data dir")[0].split("\n").filter(Boolean);
        const contents = ssh("spark-a", files.map((f) => `cat '${f}'`).join("; "));
        const argv = ssh(
            "spark-a",
            `for p in $(systemctl show -p MainPID --value ${UNITS.openWebui}.service) $(pgrep -d ' ' -f open-webui); do tr '\\0' ' ' < /proc/$p/cmdline; echo; done`,
        );
        const journal = ssh("spark-a", `journalctl -u ${UNITS.openWebui}.service --no-pager -o cat | tail -n 2000`);
        for (const [what, secret] of secrets()) {
            assert.ok(!contents.includes(secret), `${what} in a file others can read`);
            assert.ok(!argv.includes(secret), `${what} in a process's argv`);
            assert.ok(!journal.includes(secret), `${what} in the journal`);
        }
    });

    it("runs as its own system user, not root, which owns the data directory (issue 40, item 8)", () => {
        const user = ssh("spark-a", `ps -o user= -p "$(systemctl show -p MainPID --value ${UNITS.openWebui}.service)"`).trim();
        assert.equal(user, OPEN_WEBUI_USER);
        assert.equal(ssh("spark-a", `stat -c '%U %a' ${DATA_DIR}`).trim(), `${OPEN_WEBUI_USER} 700`);
        assert.equal(ssh("spark-a", `find ${DATA_DIR} ! -user ${OPEN_WEBUI_USER} | wc -l`).trim(), "0", "everything in the data directory is its");
    });

    it("a second up changes nothing", () => {
        pulumiWithConfig(session, "up", "--yes", "--skip-preview", "--expect-no-changes");
    });

    it("metrics: Prometheus on the head's loopback answers the engine's running requests and each node's available memory; the outsider reaches neither it nor an exporter", async () => {
        assert.equal(
            pulumi(session, "stack", "output", "metrics").trim(),
            `ssh -N -L ${PROMETHEUS_PORT}:127.0.0.1:${PROMETHEUS_PORT} root@${nodes["spark-a"]}, then open http://localhost:${PROMETHEUS_PORT}`,
        );
        // Debian's own promtool reads the configuration we wrote.
        assert.match(ssh("spark-a", `promtool check config ${PROMETHEUS_CONFIG_PATH} 2>&1`), /SUCCESS/);
        assert.deepEqual(ssh("spark-a", `ss -Hltn 'sport = :${PROMETHEUS_PORT}' | awk '{print $4}'`).trim().split("\n"), [`127.0.0.1:${PROMETHEUS_PORT}`]);
        const exporters: Record<string, string> = {};
        for (const node of ["spark-a", "spark-b"] as const) {
            const listening = ssh(node, `ss -Hltn 'sport = :${EXPORTER_PORT}' | awk '{print $4}'`).trim().split("\n");
            assert.equal(listening.length, 1, `${node}: one exporter socket`);
            assert.doesNotMatch(listening[0], /^(0\.0\.0\.0|\*|\[::\]):/, `${node}: the exporter is on the cluster address only`);
            exporters[node] = listening[0];
        }
        const query = (promql: string) =>
            JSON.parse(ssh("spark-a", `curl -fsS --max-time 10 -G http://127.0.0.1:${PROMETHEUS_PORT}/api/v1/query --data-urlencode 'query=${promql}'`)) as {
                data: { result: { metric: Record<string, string>; value: [number, string] }[] };
            };
        // Bounded: 24 tries 5 s apart (scrapeSeconds 5): the first scrapes after Prometheus started.
        let running: ReturnType<typeof query>["data"]["result"] = [];
        let memory: ReturnType<typeof query>["data"]["result"] = [];
        for (let attempt = 0; attempt < 24 && (running.length === 0 || memory.length < 2); attempt++) {
            if (attempt > 0) await sleep(5000);
            running = query("vllm:num_requests_running").data.result;
            memory = query("node_memory_MemAvailable_bytes").data.result;
        }
        assert.deepEqual(
            running.map((r) => [r.metric.job, r.metric.node, r.metric.model_name]),
            [["engine", "spark-a", MODEL]],
            "the engine's running requests",
        );
        assert.deepEqual(memory.map((r) => r.metric.node).sort(), ["spark-a", "spark-b"], "each node's available memory");
        for (const r of memory) assert.ok(Number(r.value[1]) > 0, `${r.metric.node}: MemAvailable ${r.value[1]}`);
        // The outsider: Prometheus (loopback) and the exporters (cluster addresses, members only by the firewall).
        const targets = [
            `${nodes["spark-a"]}:${PROMETHEUS_PORT}`,
            ...Object.values(exporters),
            `${nodes["spark-a"]}:${EXPORTER_PORT}`,
            `${nodes["spark-b"]}:${EXPORTER_PORT}`,
        ];
        const reached = ssh(
            "outsider",
            targets
                .map((t) => `timeout 3 bash -c 'exec 3<>/dev/tcp/${t.replace(":", "/")}' 2>/dev/null && echo "OPEN ${t}"`)
                .concat(["true"])
                .join("\n"),
        ).trim();
        assert.equal(reached, "", `the outsider reached: ${reached}`);
        // A member does reach the other's exporter (Prometheus's scrape of spark-b is the other proof).
        assert.match(ssh("spark-a", `curl -fsS --max-time 5 http://${exporters["spark-b"]}/metrics | grep -c '^node_memory_MemAvailable_bytes'`), /^1$/m);
    });

    it("frozen (kill -STOP): its watchdog restarts it, /health answers again, and the journal names the watchdog", async () => {
        assert.equal(ssh("spark-a", `systemctl is-active ${UNITS.openWebuiWatchdog}.service`).trim(), "active");
        const pid = ssh("spark-a", `systemctl show -p MainPID --value ${UNITS.openWebui}.service`).trim();
        const since = ssh("spark-a", "date '+%Y-%m-%d %H:%M:%S'").trim();
        const health = `curl -fsS -o /dev/null --max-time 3 http://127.0.0.1:${PORT}/health && echo up || echo down`;
        // Bounded: 300 s (the watchdog's 30 s without an answer, the restart, Open WebUI's start).
        const seconds = await secondsFrozenUntil("spark-a", pid, 300, () => {
            const now = ssh("spark-a", `systemctl show -p MainPID --value ${UNITS.openWebui}.service`).trim();
            return now !== pid && ssh("spark-a", health).trim() === "up";
        });
        const own = ssh("spark-a", `journalctl -u ${UNITS.openWebuiWatchdog}.service --since '${since}' --no-pager -o cat`);
        assert.ok(seconds > 0, `Open WebUI did not answer again within 300 s of the stop; its watchdog's journal:\n${own}`);
        console.log(`# Open WebUI frozen: /health answered again ${seconds} s after kill -STOP (pid ${pid})`);
        assert.match(own, new RegExp(`watchdog: http://127\\.0\\.0\\.1:${PORT}/health did not answer for 30 s: restarting ${UNITS.openWebui}`), own);
    });

    it("listenAddress 0.0.0.0 (opt-in) opens the port in the head's firewall: the outsider reaches the page", () => {
        setConfig(session, "spark-cluster:frontend.openWebui.listenAddress", "0.0.0.0");
        const started = Date.now();
        pulumiWithConfig(session, "up", "--yes", "--skip-preview");
        console.log(`up to listen on 0.0.0.0 (Open WebUI restarted, ready again): ${Math.round((Date.now() - started) / 1000)} s`);
        assert.equal(pulumi(session, "stack", "output", "openWebui").trim(), `http://${nodes["spark-a"]}:${PORT}`);
        const firewall = JSON.parse(pulumi(session, "stack", "output", "firewall", "--json")) as Record<string, string>;
        assert.match(firewall["spark-a"], new RegExp(`open to all: tcp [0-9,]*\\b${PORT}\\b`), firewall["spark-a"]);
        assert.doesNotMatch(firewall["spark-b"], new RegExp(`open to all: tcp [0-9,]*\\b${PORT}\\b`), firewall["spark-b"]);
        const code = ssh("outsider", `curl -s -o /dev/null -w '%{http_code}' --max-time 10 http://${nodes["spark-a"]}:${PORT}/health`).trim();
        assert.equal(code, "200");
    });

    it("destroy removes the unit and its watchdog's, the env file and the data (removeDataOnDestroy), and leaves the lab's venv", () => {
        pulumiWithConfig(session, "destroy", "--yes", "--skip-preview");
        const left = ssh(
            "spark-a",
            `for p in ${unitPath(UNITS.openWebui)} ${unitPath(UNITS.openWebuiWatchdog)} ${OPEN_WEBUI_ENV_PATH} ${DATA_DIR} ${unitPath(UNITS.prometheus)} ${PROMETHEUS_CONFIG_PATH} ${PROMETHEUS_DATA_DIR}; do [ -e "$p" ] && echo "$p"; done; [ -x ${VENV}/bin/open-webui ] && echo venv-kept; true`,
        ).trim();
        assert.equal(left, "venv-kept");
        assert.equal(ssh("spark-a", `getent passwd ${OPEN_WEBUI_USER} || echo gone`).trim(), "gone", "our system user is removed");
        // The exporters' units are gone; the packages (the owner's) stay.
        for (const node of ["spark-a", "spark-b"] as const) {
            assert.equal(
                ssh(node, `[ -e ${unitPath(UNITS.nodeExporter)} ] && echo left; [ -x /usr/bin/prometheus-node-exporter ] && echo package-kept; true`).trim(),
                "package-kept",
            );
            assert.equal(ssh(node, `ss -Hltn 'sport = :${EXPORTER_PORT}' | wc -l`).trim(), "0");
        }
        assert.equal(ssh("spark-a", `ss -Hltn 'sport = :${PORT}' | wc -l`).trim(), "0");
    });
});
