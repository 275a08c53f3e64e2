#!/usr/bin/env node
// run.mjs is the sluice-vs-llama.cpp driver: for every model file and thread
// count it runs `sluice bench --runs 1 --json` (for each sluice binary given)
// and `node llamacpp.mjs` alternately, R times each, takes the medians and
// prints Markdown tables of the ratios sluice ÷ llama.cpp. With --bandwidth
// it also runs bench/_streamread (a Go streaming-read benchmark) for each
// thread count in the same run and reports decode as a fraction of it:
// model bytes × tok/s ÷ streaming-read bytes/s.
//
// Usage (from bench/):
//   node run.mjs --sluice bin/sluice [--sluice bin/sluice-simd] \
//       --threads 1,2 --runs 5 --prompt-tokens 512 --gen-tokens 128 \
//       [--bandwidth models/1b-q8_0.gguf,models/1b-q4_0.gguf] \
//       [--sluice-args="--kv-type f16"] \
//       [--json-out results/run.json] models/15m-f32.gguf ...
//
// Constrained decoding (issue 21): with --schema FILE (repeatable) each run
// is, per model, thread count and schema, `sluice bench --json-schema-file
// FILE`, the same bench without the schema, and `node grammar.mjs --schema
// FILE --unconstrained` (llama.cpp under node-llama-cpp's
// createGrammarForJsonSchema, then without it), in alternating order; the
// tables give sluice ÷ llama.cpp under the schema and each engine's
// constrained ÷ unconstrained decode rate, by wall clock and by CPU time
// per token. --temp T (0: greedy) and --seed S go to both engines;
// --parallel N decodes N sequences in one sluice batch (llama.cpp is then
// not run: grammar.mjs decodes one sequence).
//
//   node run.mjs --sluice bin/sluice --schema schemas/record10.json \
//       --threads 1,2 --runs 5 --prompt-tokens 16 --gen-tokens 128 \
//       [--temp 0.8 --seed 1] [--parallel 32] models/110m-q8_0.gguf
//
// --sluice-args=FLAGS (with "=": its value starts with a dash) adds FLAGS,
// split at white space, to every `sluice bench`
// run, e.g. --kv-type f16 to hold the KV cache in binary16 as llama.cpp
// does by default; they are recorded in the JSON (sluice_args) and named
// in the tables' introduction.
//
// A model whose context is shorter than prompt + generated tokens gets a
// shorter prompt (context − generated), the same for both engines; the table
// shows the prompt length used. Each process loads the model once and is
// timed after loading, so load time is never in the figures.

import {parseArgs, promisify} from "node:util";
import {execFile as execFileCb} from "node:child_process";
import {statSync, mkdirSync, writeFileSync} from "node:fs";
import {basename, dirname, resolve} from "node:path";
import {fileURLToPath} from "node:url";
import os from "node:os";
import {readGgufFileInfo} from "node-llama-cpp";

const execFile = promisify(execFileCb);
const here = dirname(fileURLToPath(import.meta.url));

const {values: opt, positionals: models} = parseArgs({
    options: {
        sluice: {type: "string", multiple: true, default: []},
        threads: {type: "string", default: "1,2"},
        runs: {type: "string", default: "5"},
        "prompt-tokens": {type: "string", default: "512"},
        "gen-tokens": {type: "string", default: "128"},
        bandwidth: {type: "string", default: ""},
        "sluice-args": {type: "string", default: ""},
        "json-out": {type: "string", default: ""},
        "timeout-s": {type: "string", default: "0"},
        "kernels-stream": {type: "boolean", default: false},
        schema: {type: "string", multiple: true, default: []},
        temp: {type: "string", default: "0"},
        seed: {type: "string", default: "1"},
        parallel: {type: "string", default: "1"},
        render: {type: "boolean", default: false}
    },
    allowPositionals: true,
    strict: true
});

function fail(msg) {
    process.stderr.write(`run.mjs: ${msg}\n`);
    process.exit(2);
}

function ints(name, s) {
    const xs = s.split(",").map(Number);
    if (xs.length === 0 || xs.some((x) => !Number.isInteger(x) || x < 1))
        fail(`--${name} ${JSON.stringify(s)}: want comma-separated integers ≥ 1`);
    return xs;
}

if (!opt.render && opt.sluice.length === 0)
    fail("at least one --sluice BINARY is required");
if (models.length === 0)
    fail(opt.render ? "no results files given" : "no model files given");
const threadCounts = ints("threads", opt.threads);
const [runs] = ints("runs", opt.runs);
const [wantPrompt] = ints("prompt-tokens", opt["prompt-tokens"]);
const [genTokens] = ints("gen-tokens", opt["gen-tokens"]);
const timeoutMs = 1000 * Number(opt["timeout-s"]);
if (!(timeoutMs >= 0))
    fail(`--timeout-s ${JSON.stringify(opt["timeout-s"])}: want seconds ≥ 0 (0: none)`);
const sluiceArgs = opt["sluice-args"].split(/\s+/).filter((a) => a !== "");
for (const a of sluiceArgs)
    if (["-m", "--m", "-json", "--json", "-runs", "--runs", "-threads", "--threads", "-prompt-tokens", "--prompt-tokens", "-gen-tokens", "--gen-tokens",
        "-json-schema-file", "--json-schema-file", "-temp", "--temp", "-seed", "--seed", "-parallel", "--parallel"].includes(a.split("=")[0]))
        fail(`--sluice-args ${JSON.stringify(opt["sluice-args"])}: ${a} is set by run.mjs itself`);
const [samplingSeed] = ints("seed", opt.seed);
const [parallel] = ints("parallel", opt.parallel);
const temperature = Number(opt.temp);
if (!(temperature >= 0))
    fail(`--temp ${JSON.stringify(opt.temp)}: want a number ≥ 0 (0: greedy)`);
if (opt.schema.length === 0 && (temperature !== 0 || parallel !== 1))
    fail("--temp and --parallel belong to the constrained-decoding mode (--schema FILE)");
const bandwidthModels = new Set(opt.bandwidth === "" ? [] : opt.bandwidth.split(",").map((p) => resolve(p)));

// median ignores runs that timed out (NaN).
function median(xs) {
    const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
    return s.length === 0 ? NaN : s[Math.floor(s.length / 2)];
}

// runJSON runs a measurement and parses the last line of its stdout; a run
// killed by --timeout-s gives null (recorded as NaN), any other failure ends
// the whole run.
async function runJSON(cmd, args, cwd, timeout = 0) {
    try {
        const {stdout} = await execFile(cmd, args, {cwd, maxBuffer: 16 << 20, timeout, killSignal: "SIGKILL"});
        const line = stdout.trim().split("\n").at(-1);
        return JSON.parse(line);
    } catch (err) {
        if (timeout > 0 && err.killed) {
            log(`${basename(cmd)} ${args.slice(0, 4).join(" ")}: timed out after ${timeout / 1000} s`);
            return null;
        }
        fail(`${cmd} ${args.join(" ")}: ${err.stderr?.trim() || err.message}`);
    }
}

function log(msg) {
    process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
}

const f1 = (x) => Number.isFinite(x) ? x.toFixed(1) : "–";
const f2 = (x) => Number.isFinite(x) ? x.toFixed(2) : "–";

// okRuns notes cells where some runs timed out: "" or " (3/5)".
function okRuns(xs) {
    const n = xs.filter(Number.isFinite).length;
    return n === xs.length ? "" : ` (${n}/${xs.length})`;
}

// render turns a results object (as written by --json-out) into Markdown:
// decode and prefill tables with the ratios, then the bandwidth table for the
// cells whose model path is in bwModels.
function render(res, bwModels) {
    const {runs, cells} = res;
    const args = res.sluice_args ?? [];
    const bins = [...new Set(cells.flatMap((c) => Object.keys(c.sluice)))];
    const name = (b) => {
        const k = [...new Set(cells.map((c) => c.sluice[b]?.kernels).filter(Boolean))].join("/");
        return `${basename(b)} (${k})`;
    };
    const out = [];
    out.push(`Medians of ${runs} alternating runs (fewer where a run timed out: (ok/total)). llama.cpp = its own llama_perf counters; "node wall" = the same runs timed through node-llama-cpp. sluice bench flags beyond run.mjs's own: ${args.length === 0 ? "none" : "`" + args.join(" ") + "`"}.`);
    out.push("");
    for (const phase of ["decode", "prefill"]) {
        out.push(`#### ${phase} tok/s`);
        out.push("");
        const head = ["model", "threads", "prompt", ...bins.map(name), "llama.cpp", "llama.cpp node wall", ...bins.map((b) => `${basename(b)} ÷ llama.cpp`)];
        out.push(`| ${head.join(" | ")} |`);
        out.push(`| ${head.map((_, i) => (i < 3 ? "---" : "---:")).join(" | ")} |`);
        for (const c of cells) {
            const ll = c.llama[`llama_${phase}`];
            const ss = bins.map((b) => c.sluice[b]?.[phase] ?? []);
            const row = [c.model, c.threads, c.prompt_tokens,
                ...ss.map((xs) => f1(median(xs)) + okRuns(xs)),
                f1(median(ll)) + okRuns(ll), f1(median(c.llama[phase])),
                ...ss.map((xs) => f2(median(xs) / median(ll)))];
            out.push(`| ${row.join(" | ")} |`);
        }
        out.push("");
    }
    const bw = res.bandwidth_gb_s ?? {};
    const kbw = (res.kernels_stream_read_gb_s ?? []).filter(Number.isFinite);
    const bwCells = cells.filter((c) => bwModels.has(c.path) && bw[c.threads] != null);
    if (bwCells.length > 0) {
        out.push("#### decode as a fraction of streaming-read bandwidth");
        out.push("");
        out.push(`model bytes (file size) × decode tok/s ÷ the best streaming-read rate with as many threads (bench/_streamread GB/s, before and after the cells: ${Object.entries(bw).map(([t, xs]) => `${t} thread(s) ${xs.map(f1).join(", ")}`).join("; ")}; kernels BenchmarkStreamRead, 1 thread: ${kbw.length === 0 ? "not run" : kbw.map(f1).join(", ")}).`);
        out.push("");
        const head = ["model", "threads", "GB", "read GB/s", ...bins.map((b) => basename(b)), "llama.cpp"];
        out.push(`| ${head.join(" | ")} |`);
        out.push(`| ${head.map((_, i) => (i < 2 ? "---" : "---:")).join(" | ")} |`);
        for (const c of bwCells) {
            const rate = Math.max(...bw[c.threads].filter(Number.isFinite), ...(c.threads === 1 ? kbw : [])) * 1e9;
            const frac = (tps) => Number.isFinite(tps) ? `${(100 * c.bytes * tps / rate).toFixed(0)}%` : "–";
            out.push(`| ${[c.model, c.threads, (c.bytes / 1e9).toFixed(2), (rate / 1e9).toFixed(1), ...bins.map((b) => frac(median(c.sluice[b]?.decode ?? []))), frac(median(c.llama.llama_decode))].join(" | ")} |`);
        }
        out.push("");
    }
    return out.join("\n") + "\n";
}

// renderGrammar turns constrained-decoding results into Markdown: per model,
// schema, thread count, sampling and sequence count, each engine's decode
// tok/s with and without the schema, the ratios, the CPU time per token and
// how many generated values were complete.
function renderGrammar(res) {
    const {runs, cells} = res;
    const args = res.sluice_args ?? [];
    const out = [];
    out.push(`Medians of ${runs} alternating runs. Decode tok/s by wall clock from the first to the last token (llama.cpp: through node-llama-cpp, since its own eval counter leaves out sampling, where the grammar runs); "c÷u" = constrained ÷ unconstrained; CPU = user+system ms per generated token over prompt and decode (a CPU ratio is engine A's ms ÷ engine B's, so > 1 favours B). Values: complete values of sequences run. sluice bench flags beyond run.mjs's own: ${args.length === 0 ? "none" : "`" + args.join(" ") + "`"}.`);
    out.push("");
    const bins = [...new Set(cells.flatMap((c) => Object.keys(c.sluice)))];
    const head = ["model", "schema", "threads", "seqs", "temp", "sluice constrained", "sluice unconstrained", "sluice c÷u", "sluice c÷u by CPU", "sluice mask µs/token",
        "llama.cpp constrained", "llama.cpp unconstrained", "llama.cpp c÷u", "sluice ÷ llama.cpp constrained", "the same by CPU", "CPU ms/token constrained sluice, llama.cpp", "values sluice, llama.cpp", "tokens sluice, llama.cpp"];
    out.push(`| ${head.join(" | ")} |`);
    out.push(`| ${head.map((_, i) => (i < 5 ? "---" : "---:")).join(" | ")} |`);
    for (const c of cells) {
        const l = c.llama;
        const lc = median(l.constrained), lu = median(l.unconstrained), lcpu = median(l.cpu_constrained);
        for (const b of bins) {
            const s = c.sluice[b];
            if (s == null)
                continue;
            const sc = median(s.constrained), su = median(s.unconstrained), scpu = median(s.cpu_constrained);
            const sum = (xs) => xs.reduce((a, x) => a + x, 0);
            const row = [c.model, c.schema, c.threads, c.parallel, c.temperature,
                f1(sc), f1(su), f2(sc / su), f2(median(s.cpu_unconstrained) / scpu), f1(median(s.mask_us_per_token)),
                f1(lc), f1(lu), f2(lc / lu), f2(sc / lc), f2(lcpu / scpu), `${f1(scpu)}, ${f1(lcpu)}`,
                `${sum(s.completed)}/${sum(s.sequences)}, ${l.completed.length === 0 ? "–" : `${sum(l.completed)}/${l.completed.length}`}`,
                `${f1(median(s.tokens))}, ${f1(median(l.tokens))}`];
            if (bins.length > 1)
                row[0] = `${c.model} (${basename(b)})`;
            out.push(`| ${row.join(" | ")} |`);
        }
    }
    out.push("");
    return out.join("\n") + "\n";
}

// grammarMode measures constrained decoding (see the header) and exits.
async function grammarMode(host) {
    const started = new Date();
    const cells = [];
    const sampling = ["--temp", String(temperature), "--seed", String(samplingSeed)];
    for (const path of models) {
        const abs = resolve(path);
        const ctx = await contextLength(abs);
        const promptTokens = Math.min(wantPrompt, ctx - genTokens);
        if (promptTokens < 1)
            fail(`${path}: context ${ctx} leaves no room for a prompt beside ${genTokens} generated tokens`);
        for (const schemaPath of opt.schema) {
            const schema = resolve(schemaPath);
            for (const t of threadCounts) {
                const cell = {
                    model: basename(path), path: abs, schema: basename(schemaPath), schema_path: schema, threads: t, parallel, temperature, seed: samplingSeed,
                    prompt_tokens: promptTokens, gen_tokens: genTokens,
                    sluice: Object.fromEntries(opt.sluice.map((b) => [b, {kernels: "", constrained: [], unconstrained: [], cpu_constrained: [], cpu_unconstrained: [],
                        mask_us_per_token: [], tokens: [], completed: [], sequences: []}])),
                    llama: {constrained: [], unconstrained: [], cpu_constrained: [], cpu_unconstrained: [], llama_eval_constrained: [], tokens: [], completed: [], schema_to_gbnf_ms: []}
                };
                const common = ["--threads", String(t), "--prompt-tokens", String(promptTokens), "--gen-tokens", String(genTokens), "--runs", "1", ...sampling];
                const steps = [];
                for (const bin of opt.sluice) {
                    const s = cell.sluice[bin];
                    steps.push(async () => {
                        const r = await runJSON(resolve(bin), ["bench", "-m", abs, ...common, "--parallel", String(parallel), "--json-schema-file", schema, ...sluiceArgs, "--json"], here, timeoutMs);
                        if (r == null) {
                            for (const k of ["constrained", "cpu_constrained", "mask_us_per_token", "tokens"])
                                s[k].push(NaN);
                            return `${basename(bin)} constrained timed out`;
                        }
                        const g = r.grammar;
                        s.kernels = r.kernels;
                        s.constrained.push(r.decode_tok_s);
                        s.cpu_constrained.push(r.cpu_ms_per_token);
                        s.mask_us_per_token.push(g.mask_us_per_token);
                        s.tokens.push(g.generated_tokens / g.sequences);
                        s.completed.push(g.completed_sequences);
                        s.sequences.push(g.sequences);
                        return `${basename(bin)} constrained ${r.decode_tok_s.toFixed(1)} tok/s, ${r.cpu_ms_per_token.toFixed(1)} CPU ms/token, mask ${g.mask_us_per_token.toFixed(1)} µs/token, ${g.completed_sequences}/${g.sequences} complete`;
                    });
                    steps.push(async () => {
                        const r = await runJSON(resolve(bin), ["bench", "-m", abs, ...common, "--parallel", String(parallel), ...sluiceArgs, "--json"], here, timeoutMs);
                        if (r == null) {
                            s.unconstrained.push(NaN);
                            s.cpu_unconstrained.push(NaN);
                            return `${basename(bin)} unconstrained timed out`;
                        }
                        s.unconstrained.push(r.decode_tok_s);
                        s.cpu_unconstrained.push(r.cpu_ms_per_token);
                        return `${basename(bin)} unconstrained ${r.decode_tok_s.toFixed(1)} tok/s, ${r.cpu_ms_per_token.toFixed(1)} CPU ms/token`;
                    });
                }
                if (parallel === 1) {
                    steps.push(async () => {
                        const r = await runJSON(process.execPath, [resolve(here, "grammar.mjs"), "-m", abs, "--schema", schema, ...common, "--unconstrained"], here, timeoutMs);
                        const l = cell.llama;
                        if (r == null) {
                            for (const k of ["constrained", "unconstrained", "cpu_constrained", "cpu_unconstrained", "llama_eval_constrained", "tokens"])
                                l[k].push(NaN);
                            return "llama.cpp timed out";
                        }
                        const [c] = r.constrained, [u] = r.unconstrained;
                        l.constrained.push(c.decode_tok_s);
                        l.unconstrained.push(u.decode_tok_s);
                        l.cpu_constrained.push(c.cpu_ms_per_token);
                        l.cpu_unconstrained.push(u.cpu_ms_per_token);
                        l.llama_eval_constrained.push(c.llama_eval_tok_s);
                        l.tokens.push(c.tokens);
                        l.completed.push(c.completed ? 1 : 0);
                        l.schema_to_gbnf_ms.push(r.schema_to_gbnf_ms);
                        return `llama.cpp constrained ${c.decode_tok_s.toFixed(1)} tok/s (${c.tokens} tokens${c.completed ? ", complete" : ""}), unconstrained ${u.decode_tok_s.toFixed(1)}`;
                    });
                }
                for (let i = 0; i < runs; i++) {
                    const order = i % 2 === 0 ? steps : [...steps].reverse();
                    const notes = [];
                    for (const step of order)
                        notes.push(await step());
                    log(`${cell.model} ${cell.schema} t=${t} seqs=${parallel} run ${i + 1}/${runs} (load ${os.loadavg()[0].toFixed(1)}): ${notes.join("; ")}`);
                }
                cells.push(cell);
            }
        }
    }
    host.loadavg_end = os.loadavg();
    process.stdout.write(renderGrammar({runs, sluice_args: sluiceArgs, cells}));
    if (opt["json-out"] !== "") {
        mkdirSync(dirname(resolve(opt["json-out"])), {recursive: true});
        writeFileSync(opt["json-out"], JSON.stringify({mode: "grammar", started, finished: new Date(), host, runs, sluice_args: sluiceArgs, cells}, null, 1) + "\n");
    }
    process.exit(0);
}

// --render: print the tables of earlier --json-out files (their cells in
// order) without measuring anything.
if (opt.render) {
    const {readFileSync} = await import("node:fs");
    const merged = {runs: 0, cells: [], bandwidth_gb_s: {}, kernels_stream_read_gb_s: [], sluice_args: null};
    const bw = new Set(bandwidthModels);
    const files = models.map((f) => [f, JSON.parse(readFileSync(f, "utf8"))]);
    const grammarFiles = files.filter(([, res]) => res.mode === "grammar");
    if (grammarFiles.length > 0) {
        if (grammarFiles.length !== files.length)
            fail("constrained-decoding results (--schema) and plain ones cannot be rendered together");
        for (const [f, res] of grammarFiles) {
            const a = res.sluice_args ?? [];
            if (merged.sluice_args != null && merged.sluice_args.join(" ") !== a.join(" "))
                fail(`${f}: sluice_args ${JSON.stringify(a)} differ from the earlier files' ${JSON.stringify(merged.sluice_args)}; render them apart`);
            merged.sluice_args = a;
            merged.runs = Math.max(merged.runs, res.runs);
            merged.cells.push(...res.cells);
        }
        process.stdout.write(renderGrammar(merged));
        process.exit(0);
    }
    for (const [f, res] of files) {
        merged.runs = Math.max(merged.runs, res.runs);
        merged.cells.push(...res.cells);
        const a = res.sluice_args ?? [];
        if (merged.sluice_args != null && merged.sluice_args.join(" ") !== a.join(" "))
            fail(`${f}: sluice_args ${JSON.stringify(a)} differ from the earlier files' ${JSON.stringify(merged.sluice_args)}; render them apart`);
        merged.sluice_args = a;
        for (const [t, xs] of Object.entries(res.bandwidth_gb_s ?? {}))
            (merged.bandwidth_gb_s[t] ??= []).push(...xs);
        merged.kernels_stream_read_gb_s.push(...(res.kernels_stream_read_gb_s ?? []));
        for (const m of res.bandwidth_models ?? [])
            bw.add(m);
    }
    process.stdout.write(render(merged, bw));
    process.exit(0);
}

// The context length bounds the prompt: sluice bench refuses prompt + gen
// tokens beyond it, so both engines get the same shorter prompt.
async function contextLength(path) {
    const info = await readGgufFileInfo(path, {readTensorInfo: false, logWarnings: false, ignoreKeys: ["tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"]});
    const arch = info.metadata?.general?.architecture;
    const n = info.metadata?.[arch]?.context_length;
    if (!Number.isInteger(n))
        fail(`${path}: no ${arch}.context_length in the GGUF metadata`);
    return n;
}

async function streamRead(threads) {
    const repo = resolve(here, "..");
    return runJSON("go", ["run", "./bench/_streamread", "-threads", String(threads)], repo);
}

// kernelsStreamRead runs the kernels package's own single-threaded
// BenchmarkStreamRead (with GOEXPERIMENT=simd, so AVX-512 loads) and returns
// its GB/s, or NaN when the benchmark is absent or fails.
async function kernelsStreamRead() {
    const repo = resolve(here, "..");
    try {
        const {stdout} = await execFile("go", ["test", "-run", "^$", "-bench", "^BenchmarkStreamRead$", "-benchtime", "20x", "-count", "3", "./kernels"],
            {cwd: repo, env: {...process.env, GOEXPERIMENT: "simd"}, maxBuffer: 16 << 20});
        const rates = [...stdout.matchAll(/BenchmarkStreamRead\S*\s.*?([\d.]+) MB\/s/g)].map((m) => Number(m[1]) / 1000);
        return rates.length === 0 ? NaN : Math.max(...rates);
    } catch (err) {
        log(`kernels BenchmarkStreamRead failed: ${err.stderr?.trim() || err.message}`);
        return NaN;
    }
}

const started = new Date();
const host = {
    cpus: os.cpus().map((c) => c.model)[0],
    cores: os.cpus().length,
    loadavg_start: os.loadavg()
};
if (opt.schema.length > 0)
    await grammarMode(host);
const bandwidth = {};
const kernelsBandwidth = [];
async function kernelsPhase() {
    if (!opt["kernels-stream"] || bandwidthModels.size === 0)
        return;
    const g = await kernelsStreamRead();
    kernelsBandwidth.push(g);
    log(`kernels BenchmarkStreamRead (1 thread): ${g.toFixed(1)} GB/s`);
}
await kernelsPhase();
if (bandwidthModels.size > 0) {
    for (const t of threadCounts) {
        const r = await streamRead(t);
        bandwidth[t] = [r.gb_s];
        log(`streamread ${t} thread(s): ${r.gb_s.toFixed(1)} GB/s`);
    }
}

const cells = [];
for (const path of models) {
    const abs = resolve(path);
    const ctx = await contextLength(abs);
    const promptTokens = Math.min(wantPrompt, ctx - genTokens);
    if (promptTokens < 1)
        fail(`${path}: context ${ctx} leaves no room for a prompt beside ${genTokens} generated tokens`);
    const bytes = statSync(abs).size;
    for (const t of threadCounts) {
        const cell = {
            model: basename(path), path: abs, bytes, threads: t, prompt_tokens: promptTokens, gen_tokens: genTokens,
            sluice: Object.fromEntries(opt.sluice.map((b) => [b, {kernels: "", prefill: [], decode: []}])),
            llama: {prefill: [], decode: [], llama_prefill: [], llama_decode: [], flash_attention: null}
        };
        const common = ["--threads", String(t), "--prompt-tokens", String(promptTokens), "--gen-tokens", String(genTokens), "--runs", "1"];
        const steps = [
            ...opt.sluice.map((bin) => async () => {
                const r = await runJSON(resolve(bin), ["bench", "-m", abs, ...common, ...sluiceArgs, "--json"], here, timeoutMs);
                const s = cell.sluice[bin];
                if (r == null) {
                    s.prefill.push(NaN);
                    s.decode.push(NaN);
                    return `${basename(bin)} timed out`;
                }
                s.kernels = r.kernels;
                s.prefill.push(r.prefill_tok_s);
                s.decode.push(r.decode_tok_s);
                return `${basename(bin)}(${r.kernels}) ${r.prefill_tok_s.toFixed(1)}/${r.decode_tok_s.toFixed(1)}`;
            }),
            async () => {
                const r = await runJSON(process.execPath, [resolve(here, "llamacpp.mjs"), "-m", abs, ...common], here, timeoutMs);
                const l = cell.llama;
                if (r == null) {
                    for (const k of ["prefill", "decode", "llama_prefill", "llama_decode"])
                        l[k].push(NaN);
                    return "llama.cpp timed out";
                }
                l.flash_attention = r.flash_attention;
                for (const k of ["prefill", "decode", "llama_prefill", "llama_decode"])
                    l[k].push(r[`${k}_tok_s`]);
                return `llama.cpp ${r.llama_prefill_tok_s.toFixed(1)}/${r.llama_decode_tok_s.toFixed(1)}`;
            }
        ];
        for (let i = 0; i < runs; i++) {
            // Alternate which engine goes first, so a drift in machine load
            // does not always favour the same one.
            const order = i % 2 === 0 ? steps : [...steps].reverse();
            const notes = [];
            for (const step of order)
                notes.push(await step());
            log(`${cell.model} t=${t} run ${i + 1}/${runs}: prefill/decode tok/s ${notes.join(", ")}`);
        }
        cells.push(cell);
    }
}
if (bandwidthModels.size > 0) {
    for (const t of threadCounts) {
        const r = await streamRead(t);
        bandwidth[t].push(r.gb_s);
        log(`streamread ${t} thread(s), again: ${r.gb_s.toFixed(1)} GB/s`);
    }
}
await kernelsPhase();
host.loadavg_end = os.loadavg();

process.stdout.write(render({runs, sluice_args: sluiceArgs, bandwidth_gb_s: bandwidth, kernels_stream_read_gb_s: kernelsBandwidth, cells}, bandwidthModels));

if (opt["json-out"] !== "") {
    mkdirSync(dirname(resolve(opt["json-out"])), {recursive: true});
    writeFileSync(opt["json-out"], JSON.stringify({started, finished: new Date(), host, runs, sluice_args: sluiceArgs, bandwidth_gb_s: bandwidth, kernels_stream_read_gb_s: kernelsBandwidth, bandwidth_models: [...bandwidthModels], cells}, null, 1) + "\n");
}
