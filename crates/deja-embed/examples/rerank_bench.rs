//! What the cross-encoder reranker costs per search: latency of one `Reranker::score` call for
//! 5, 10 and 20 candidates of ~60, ~150 and ~400 words, and for `max_length` 128, the
//! configured default (`reranker.max_length`), 256 and 512.
//!
//!     cargo run --release -p deja-embed --example rerank_bench
//!
//! Model paths as in the tests: `DEJA__RERANKER__MODEL_DIR` and `ORT_DYLIB_PATH` if set, else
//! `.deja/models` of this repository. `BENCH_RUNS` (default 30) calls per configuration; p50
//! and p95 of them are printed. Queries and documents are cut from the same incident texts as
//! `embed_bench` (`bench/incidents.txt`), a different query for every call.

use deja_config::Settings;
use deja_embed::{LocalReranker, Reranker, RerankerPaths};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

const INCIDENTS: &str = include_str!("../bench/incidents.txt");
/// Words of every query: about what an agent's search text is.
const QUERY_WORDS: usize = 25;

fn main() -> ExitCode {
    // Print errors with Display: the Debug form `main` would use drops the fix hint.
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rerank_bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let runs: usize = match std::env::var("BENCH_RUNS") {
        Ok(v) => v.parse()?,
        Err(_) => 30,
    };
    let words: Vec<&str> = INCIDENTS.split_whitespace().collect();
    let lines: Vec<&str> = INCIDENTS.lines().filter(|l| !l.trim().is_empty()).collect();

    let models = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.deja/models");
    let mut paths = RerankerPaths::from_settings(
        &Settings::defaults().reranker,
        &Settings::defaults().embedding,
    );
    paths.model_dir = match std::env::var_os("DEJA__RERANKER__MODEL_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => models.join("ms-marco-MiniLM-L-12-v2"),
    };
    paths.ort_dylib_path = match std::env::var_os("ORT_DYLIB_PATH") {
        Some(path) if !path.is_empty() => PathBuf::new(),
        _ => models.join("onnxruntime/libonnxruntime.so.1.24.4"),
    };

    let default_length = paths.max_length;
    let mut lengths = vec![128, default_length, 256, 512];
    lengths.sort_unstable();
    lengths.dedup();
    let default_index = lengths
        .iter()
        .position(|&length| length == default_length)
        .unwrap_or(0);
    let mut loaded = Vec::new();
    for max_length in lengths {
        let started = Instant::now();
        let reranker = LocalReranker::load(&RerankerPaths {
            max_length,
            ..paths.clone()
        })?;
        let load_ms = started.elapsed().as_millis();
        loaded.push((max_length, reranker, load_ms));
    }
    let (_, default, load_ms) = &loaded[default_index];
    println!(
        "reranker {} from {}, loaded in {load_ms} ms; {runs} calls per line, query {QUERY_WORDS} words",
        default.model_id(),
        default.model_dir().display()
    );

    // Warm-up: the first runs allocate arenas and pick kernels.
    for (_, reranker, _) in &loaded {
        let docs = documents(&words, 0, 5, 400);
        reranker.score(&query(&lines, 0), &docs)?;
    }

    let mut case = 0usize;
    let mut measure = |reranker: &LocalReranker,
                       pairs: usize,
                       doc_words: usize|
     -> Result<(f64, f64), Box<dyn std::error::Error>> {
        let mut ms = Vec::with_capacity(runs);
        for _ in 0..runs {
            case += 1;
            let q = query(&lines, case);
            let docs = documents(&words, case * 37, pairs, doc_words);
            let t = Instant::now();
            let scores = reranker.score(&q, &docs)?;
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
            if scores.len() != pairs {
                return Err(format!("{} scores for {pairs} documents", scores.len()).into());
            }
        }
        Ok((percentile(&mut ms, 0.50), percentile(&mut ms, 0.95)))
    };

    println!("\nmax_length {default_length} (the default), one pair per model run:");
    println!("| pairs | words per document | p50 ms | p95 ms | p50 ms per pair |");
    println!("|---|---|---|---|---|");
    for doc_words in [60, 150] {
        for pairs in [5, 10, 20] {
            let (p50, p95) = measure(default, pairs, doc_words)?;
            println!(
                "| {pairs} | {doc_words} | {p50:.0} | {p95:.0} | {:.1} |",
                p50 / pairs as f64
            );
            println!("RESULT max_length={default_length} pairs={pairs} words={doc_words} p50_ms={p50:.1} p95_ms={p95:.1}");
        }
    }

    println!("\n10 pairs, by max_length (tokens per pair, query and document together):");
    println!("| max_length | words per document | p50 ms | p95 ms |");
    println!("|---|---|---|---|");
    for (max_length, reranker, _) in &loaded {
        for doc_words in [60, 150, 400] {
            let (p50, p95) = measure(reranker, 10, doc_words)?;
            println!("| {max_length} | {doc_words} | {p50:.0} | {p95:.0} |");
            println!("RESULT max_length={max_length} pairs=10 words={doc_words} p50_ms={p50:.1} p95_ms={p95:.1}");
        }
    }

    // The default runs one pair at a time so that a score never depends on its neighbours;
    // this is what batching all of a call's pairs into one run would save.
    println!("\nmax_length {default_length}, 10 pairs, all pairs of a call in one model run (padded batch):");
    println!("| words per document | p50 ms | p95 ms |");
    println!("|---|---|---|");
    let models_loaded = loaded.len();
    let (_, batched, _) = loaded.remove(default_index);
    let batched = batched.with_pairs_per_run(64);
    for doc_words in [60, 150] {
        let (p50, p95) = measure(&batched, 10, doc_words)?;
        println!("| {doc_words} | {p50:.0} | {p95:.0} |");
        println!("RESULT batched max_length={default_length} pairs=10 words={doc_words} p50_ms={p50:.1} p95_ms={p95:.1}");
    }
    println!(
        "\npeak RSS: {:.0} MiB ({} models loaded)",
        peak_rss_mib(),
        models_loaded
    );
    Ok(())
}

/// The first `QUERY_WORDS` words of incident `n`.
fn query(lines: &[&str], n: usize) -> String {
    let line = lines[n % lines.len()];
    line.split_whitespace()
        .take(QUERY_WORDS)
        .collect::<Vec<_>>()
        .join(" ")
}

/// `count` documents of exactly `doc_words` words, cut one after the other from the incident
/// texts starting at word `start` (wrapping around).
fn documents(words: &[&str], start: usize, count: usize, doc_words: usize) -> Vec<String> {
    (0..count)
        .map(|i| {
            let from = start + i * doc_words;
            (0..doc_words)
                .map(|j| words[(from + j) % words.len()])
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let rank = ((values.len() as f64 - 1.0) * p).round() as usize;
    values.get(rank).copied().unwrap_or(0.0)
}

/// `VmHWM` of `/proc/self/status`: the peak resident set size (0 where there is no procfs).
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()
        })
        .map_or(0.0, |kib| kib / 1024.0)
}
