// common.mjs: the pieces every measurement script here shares — argument
// checks that fail with the script's name, the seeded prompt generator (so
// every script and process evaluates the same prompts), and the median.

// failer returns fail(msg) for the named script: print and exit 2.
export function failer(script) {
    return (msg) => {
        process.stderr.write(`${script}: ${msg}\n`);
        process.exit(2);
    };
}

// positiveInt reads opt[name] as an integer ≥ 1, or fails.
export function positiveInt(opt, name, fail) {
    const v = Number(opt[name]);
    if (!Number.isInteger(v) || v < 1)
        fail(`--${name} ${JSON.stringify(opt[name])}: want an integer ≥ 1`);
    return v;
}

// rng is mulberry32: a small seeded generator.
export function rng(a) {
    return () => {
        a = (a + 0x6D2B79F5) | 0;
        let t = Math.imul(a ^ (a >>> 15), 1 | a);
        t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}

export function median(xs) {
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.floor(s.length / 2)];
}
