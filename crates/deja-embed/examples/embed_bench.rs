//! Throughput and memory of the local embedder on ~200 realistic incident summaries.
//!
//!     cargo run --release -p deja-embed --example embed_bench
//!
//! Model paths as in the tests: `DEJA__EMBEDDING__MODEL_DIR` and `ORT_DYLIB_PATH` if set, else
//! `.deja/models` of this repository. `BENCH_ROUNDS` (default 3) rounds per batch size; the
//! median round is reported. The last line is machine-readable for `bench/run.sh`.

use deja_config::Settings;
use deja_embed::{cosine, Embedder, LocalEmbedder};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// The same file `bench/reference.py` reads, so both sides embed identical texts.
const INCIDENTS: &str = include_str!("../bench/incidents.txt");

fn main() -> ExitCode {
    // Print errors with Display: the Debug form `main` would use drops the fix hint.
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("embed_bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let texts: Vec<String> = INCIDENTS
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    let rounds: usize = match std::env::var("BENCH_ROUNDS") {
        Ok(v) => v.parse()?,
        Err(_) => 3,
    };

    let models = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.deja/models");
    let mut settings = Settings::defaults().embedding;
    settings.model_dir = match std::env::var_os("DEJA__EMBEDDING__MODEL_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => models.join("all-MiniLM-L6-v2"),
    };
    settings.ort_dylib_path = match std::env::var_os("ORT_DYLIB_PATH") {
        Some(path) if !path.is_empty() => PathBuf::new(),
        _ => models.join("onnxruntime/libonnxruntime.so.1.24.4"),
    };
    // The batch-64 figure needs the embedder to hand ONNX Runtime 64 texts at a time; the
    // batch-1 figure calls it with one text, where the setting does not matter.
    settings.batch_size = 64;

    let started = Instant::now();
    let embedder = LocalEmbedder::load(&settings)?;
    let load_ms = started.elapsed().as_millis();
    let words: usize = texts.iter().map(|t| t.split_whitespace().count()).sum();
    println!(
        "rust fastembed+ort: {} texts, {:.1} words on average, model {}, loaded in {load_ms} ms",
        texts.len(),
        words as f64 / texts.len() as f64,
        embedder.paths().model_dir.display()
    );

    // Warm-up: the first runs allocate arenas and pick kernels.
    embedder.embed(&texts[..8])?;

    let batch1 = median(
        (0..rounds)
            .map(|_| {
                let t = Instant::now();
                for text in &texts {
                    embedder.embed(std::slice::from_ref(text))?;
                }
                Ok(texts.len() as f64 / t.elapsed().as_secs_f64())
            })
            .collect::<Result<Vec<f64>, deja_embed::EmbedError>>()?,
    );
    let batch64 = median(
        (0..rounds)
            .map(|_| {
                let t = Instant::now();
                embedder.embed(&texts)?;
                Ok(texts.len() as f64 / t.elapsed().as_secs_f64())
            })
            .collect::<Result<Vec<f64>, deja_embed::EmbedError>>()?,
    );

    let probe = embedder.embed(&[
        "redis evicted keys climbing, payments pods crashloop".to_string(),
        "redis memory eviction caused payment service crashes".to_string(),
        "TLS certificate expired on the ingress".to_string(),
    ])?;
    let peak = peak_rss_mib();
    println!("batch 1:  {batch1:.1} texts/s");
    println!("batch 64: {batch64:.1} texts/s");
    println!("peak RSS: {peak:.0} MiB");
    println!(
        "sanity: cos(similar) = {:.4}, cos(unrelated) = {:.4}, v0[..4] = {:?}",
        cosine(&probe[0], &probe[1]),
        cosine(&probe[0], &probe[2]),
        &probe[0][..4]
    );
    println!("RESULT impl=rust batch1={batch1:.2} batch64={batch64:.2} peak_rss_mib={peak:.0}");
    Ok(())
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
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
