// The model sync's rate over the lab's interconnect against the link's own (issue 41, item 2): on
// the lab's Spark pair (lab/lab.sh up first, nothing deployed), a repository of SIZE_MIB (default
// 2048) in 16 files is made in spark-a's Hugging Face cache; the model sync's own serve and pull
// scripts (components/render/modelSync.ts, as the steps run them) copy it to spark-b over
// 192.168.100.0/24 with 1 stream and with model.syncStreams' default (4), each run from an empty
// copy on spark-b, the source in the page cache (a first run warms it and is not counted); then
// iperf3 (Debian's, this machine's binary run in each node's network namespace: nothing is
// installed in a node) measures the same link with 1 and 4 TCP streams. Prints the figures and
// exits 0 whatever they are; removes the repository from both nodes at the end.
//   node build/bench/syncRate.js [SIZE_MIB]
import { execFileSync } from "node:child_process";
import { HF_HUB_DIR } from "../config/hostPaths";
import { hubRepoDirName, modelPullScript, modelServeScript } from "../components/render/modelSync";
import { shellQuote } from "../components/render/host/shell";
import { ssh } from "../test/integration/stackSession";
import { sleep } from "../test/lab/lab-harness";

const REPO = "lab/sync-bench";
const DIR = `${HF_HUB_DIR}/${hubRepoDirName(REPO)}`;
const HEAD_IP = "192.168.100.11";
const WORKER_IP = "192.168.100.12";
const SECRET = "sync-bench-secret-0123456789abcdef";
const FILES = 16;

/** The lab's network namespace of a node (lab/lib/common.sh, LAB_NS_PREFIX). */
const nsOf = (node: string) => `sclab-${node}`;

/** The interconnect addresses the bench needs, added by hand (nothing is deployed) and removed at the end. */
function addresses(add: boolean): void {
    for (const [node, ip] of [
        ["spark-a", HEAD_IP],
        ["spark-b", WORKER_IP],
    ])
        ssh(node as "spark-a" | "spark-b", `ip addr ${add ? "replace" : "del"} ${ip}/24 dev enp1s0f1np1 ${add ? "" : "|| true"}`);
}

function makeRepository(sizeMiB: number): void {
    const each = Math.max(1, Math.floor(sizeMiB / FILES));
    ssh(
        "spark-a",
        [
            `rm -rf ${DIR} && mkdir -p ${DIR}/blobs ${DIR}/snapshots/rev1 ${DIR}/refs && echo rev1 > ${DIR}/refs/main`,
            `for i in $(seq 1 ${FILES}); do head -c ${each}M /dev/urandom > ${DIR}/blobs/blob$i; ln -s ../../blobs/blob$i ${DIR}/snapshots/rev1/model-$i.safetensors; done`,
            `echo '{}' > ${DIR}/blobs/config && ln -s ../../blobs/config ${DIR}/snapshots/rev1/config.json`,
        ].join("\n"),
        600,
    );
}

/** One sync with `streams`: serve on spark-a in the background, pull on spark-b; the pull's closing line. */
async function syncOnce(streams: number): Promise<string> {
    ssh("spark-b", `rm -rf ${DIR} /var/lib/spark-cluster/model-sync`);
    ssh("spark-a", `rm -rf /var/lib/spark-cluster/model-sync`);
    const serve = modelServeScript({ repoId: REPO, node: "spark-a", headIp: HEAD_IP, workers: [{ node: "spark-b", ips: [WORKER_IP] }] });
    const pull = modelPullScript({ repoId: REPO, node: "spark-b", head: "spark-a", headIp: HEAD_IP, streams });
    ssh(
        "spark-a",
        `printf '%s' ${shellQuote(serve)} > /root/serve.sh && { echo ${SECRET} | setsid bash /root/serve.sh > /root/serve.log 2>&1 & echo $! > /root/serve.pid; }`,
    );
    await sleep(1000);
    const out = ssh("spark-b", `printf '%s' ${shellQuote(pull)} > /root/pull.sh && echo ${SECRET} | bash /root/pull.sh 2>&1`, 1800);
    // The serve step ends once it saw spark-b's done mark (it looks every 2 s): the next run's daemon needs the port.
    ssh(
        "spark-a",
        `for i in $(seq 1 60); do kill -0 "$(cat /root/serve.pid)" 2>/dev/null || exit 0; sleep 1; done; echo "the serve step did not end"; cat /root/serve.log; exit 1`,
    );
    const line = out.split("\n").find((l) => / pulled \d+ MiB in /.test(l));
    if (line === undefined) throw new Error(`the pull printed no rate:\n${out}`);
    return line.replace(/^\[spark-cluster\] /, "");
}

/** iperf3 from spark-b to spark-a over the interconnect, `streams` TCP streams: its receiver's rate. */
function iperf(streams: number): string {
    // One test, then the server exits (-1); daemonized (-D) so that the client can run.
    execFileSync("ip", ["netns", "exec", nsOf("spark-a"), "iperf3", "-s", "-1", "-D", "-B", HEAD_IP]);
    execFileSync("sleep", ["1"]);
    const report = JSON.parse(
        execFileSync("ip", ["netns", "exec", nsOf("spark-b"), "iperf3", "-c", HEAD_IP, "-B", WORKER_IP, "-t", "5", "-P", String(streams), "-J"], {
            encoding: "utf8",
        }),
    ) as { end: { sum_received: { bits_per_second: number } } };
    return `${(report.end.sum_received.bits_per_second / 8e6).toFixed(1)} MB/s`;
}

async function main(): Promise<void> {
    const size = Number(process.argv[2] ?? "2048");
    if (!(size >= 16 && size <= 16384)) throw new Error(`SIZE_MIB: 16-16384, not ${process.argv[2]}`);
    try {
        execFileSync("sh", ["-c", "command -v iperf3"], { stdio: "ignore" });
    } catch {
        throw new Error("iperf3 is not on this machine: apt-get install iperf3 (the bench runs it in the nodes' network namespaces)");
    }
    addresses(true);
    try {
        makeRepository(size);
        console.log(`a repository of ${size} MiB in ${FILES} files on spark-a; spark-b pulls it over ${HEAD_IP}`);
        await syncOnce(4); // warms the source's page cache
        for (const streams of [1, 4, 1, 4]) console.log(`model sync, ${streams} stream(s): ${await syncOnce(streams)}`);
        for (const streams of [1, 4]) console.log(`iperf3 over the same link, ${streams} TCP stream(s): ${iperf(streams)}`);
    } finally {
        ssh("spark-a", `rm -rf ${DIR} /var/lib/spark-cluster /root/serve.sh /root/serve.log /root/serve.pid`);
        ssh("spark-b", `rm -rf ${DIR} /var/lib/spark-cluster /root/pull.sh`);
        addresses(false);
    }
}

main().catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(1);
});
