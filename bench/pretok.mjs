#!/usr/bin/env node
// pretok.mjs prints llama.cpp's token ids for a set of texts under each of
// several vocabulary-only GGUF files, so sluice's tokenizers (every
// tokenizer.ggml.pre value, parse_special, the end-of-generation set) can be
// checked against llama.cpp's. It loads each file with node-llama-cpp's
// prebuilt CPU binary (vocabOnly: no tensors needed) and tokenizes every text
// twice, as llama_tokenize(add_special = false) with parse_special false and
// true. It prints one JSON object:
//
//   {"build": …, "models": {"FILE": {"plain": [[ids]…], "special": [[ids]…],
//     "eog": [ids], "bos": id|null, "eos": id|null, "addBos": bool}}}
//
// Usage:
//   node pretok.mjs --cases CASES.json MODEL.gguf…
//
// CASES.json is a JSON array of strings. It never builds or downloads
// anything (build: "never"). `go test ./tokenizer -run LlamaCpp` runs it when
// node_modules are installed; `-update` rewrites the committed golden.

import {readFileSync} from "node:fs";
import {parseArgs} from "node:util";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";
import {failer} from "./common.mjs";

const fail = failer("pretok.mjs");
const {values: opt, positionals: models} = parseArgs({
    options: {
        cases: {type: "string"},
        verbose: {type: "boolean", short: "v", default: false}
    },
    allowPositionals: true,
    strict: true
});
if (opt.cases == null)
    fail("--cases CASES.json is required");
if (models.length === 0)
    fail("give at least one MODEL.gguf");
let cases;
try {
    cases = JSON.parse(readFileSync(opt.cases, "utf8"));
} catch (err) {
    fail(`${opt.cases}: ${err.message}`);
}
if (!Array.isArray(cases) || cases.some((c) => typeof c !== "string"))
    fail(`${opt.cases}: want a JSON array of strings`);

const llama = await getLlama({
    gpu: false,
    build: "never",
    logLevel: opt.verbose ? LlamaLogLevel.info : LlamaLogLevel.error,
    logger(level, message) {
        // vocab-only loads make node-llama-cpp's resource estimate fail
        // ("missing tensor"); that is expected and harmless.
        if (opt.verbose)
            process.stderr.write(`[llama.cpp ${level}] ${message}\n`);
    }
});
const out = {};
for (const path of models) {
    let model;
    try {
        model = await llama.loadModel({modelPath: path, vocabOnly: true});
    } catch (err) {
        fail(`${path}: ${err.message}`);
    }
    const eog = [];
    for (let id = 0; id < vocabSize(model, path); id++) {
        if (model.isEogToken(id))
            eog.push(id);
    }
    out[path] = {
        plain: cases.map((c) => model.tokenize(c, false)),
        special: cases.map((c) => model.tokenize(c, true)),
        eog,
        bos: model.tokens.bos,
        eos: model.tokens.eos,
        addBos: model.tokens.shouldPrependBosToken
    };
    await model.dispose();
}
process.stdout.write(JSON.stringify({build: llama.buildType, models: out}) + "\n");
await llama.dispose();

// vocabSize reads the token count from the file's metadata.
function vocabSize(model, path) {
    const tokens = model.fileInfo.metadata?.tokenizer?.ggml?.tokens;
    if (!Array.isArray(tokens))
        fail(`${path}: no tokenizer.ggml.tokens array in the metadata node-llama-cpp read`);
    return tokens.length;
}
