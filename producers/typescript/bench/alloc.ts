/**
 * Bytes allocated and young-generation collections per decision, deterministic enough to compare
 * while other work runs on the machine (unlike CPU time):
 *   node dist/bench/alloc.js VARIANT CONTENTS.json COUNT WARMUP
 * runs `vs-otel.js VARIANT` in a child with `--expose-gc --trace-gc-nvp` and sums V8's `allocated=`
 * (bytes allocated since the previous collection) over the collections between its two marks (each
 * mark is preceded by a full collection, so the sum is exactly what the measured run allocated on
 * the main thread's heap). Prints one JSON line.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const [variant = "blackbox", file = "", countText = "1000", warmupText = "100", ...flags] = process.argv.slice(2);
const count = Number(countText);
const script = fileURLToPath(new URL("./vs-otel.js", import.meta.url));
const done = spawnSync(process.execPath, ["--expose-gc", "--trace-gc-nvp", ...flags, script, variant, file, countText, warmupText], { encoding: "utf8", maxBuffer: 1 << 30 });
if (done.status !== 0) throw new Error(`vs-otel failed: ${done.stderr}`);
let measuring = false;
let allocated = 0;
let scavenges = 0;
let marks = 0;
let result: unknown;
for (const line of done.stdout.split("\n")) {
  if (line === "bench:start") measuring = true;
  else if (line === "bench:end") measuring = false;
  else if (line.startsWith("{")) result = JSON.parse(line);
  else if (measuring && line.includes(" gc=")) {
    allocated += Number(/ allocated=(\d+)/.exec(line)?.[1] ?? 0);
    if (/ gc=s /.test(line)) scavenges += 1;
    else marks += 1;
  }
}
// the full collection the end mark makes counts what the run allocated after its last collection (it is not one of the run's)
marks -= 1;
console.log(JSON.stringify({ variant, count, bytesPerDecision: Math.round(allocated / count), scavengesPer1000: (scavenges * 1000) / count, markCompacts: marks, run: result }));
