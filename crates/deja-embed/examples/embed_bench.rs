//! Throughput and memory of the local embedder on ~200 realistic incident summaries, or on
//! the episode texts of an ingest run.
//!
//!     cargo run --release -p deja-embed --example embed_bench
//!
//! Model paths as in the tests: `DEJA__EMBEDDING__MODEL_DIR` and `ORT_DYLIB_PATH` if set, else
//! `.deja/models` of this repository. `BENCH_ROUNDS` (default 3) rounds per batch size; the
//! median round is reported. The last line is machine-readable for `bench/run.sh` and
//! `deploy/bench/ingest.sh`.
//!
//! - `EMBED_BENCH_EPISODES=FILE`: embed episode texts instead of `bench/incidents.txt`. FILE
//!   holds one JSON object per line with `issue_type`, `issue_description`, `summary` and
//!   `root_cause` (may be null), turned into the text the worker embeds
//!   (`deja_domain::embedding_text`). `deploy/bench/ingest.sh` writes it from Neo4j.
//! - `EMBED_BENCH_BATCHES=1,16,64` (the default): the batch sizes measured. `batch1` and the
//!   best of the others (`ceiling`) are on the RESULT line, with every size as `batchN`.
//!
//! Unless `EMBED_BENCH_PADDING=0`, it also checks what batching does to the vectors: the int8 model's output shifts slightly
//! with the padding of a batch (texts are padded to the longest one). It prints the cosine
//! between each text embedded alone and inside a batch of 64, and whether that changes
//! which text ranks first for two sets of queries (the incident summaries, and the first
//! sentence of each text).

use deja_config::Settings;
use deja_domain::embedding_text;
use deja_embed::{cosine, Embedder, LocalEmbedder};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// The same file `bench/reference.py` reads, so both sides embed identical texts.
const INCIDENTS: &str = include_str!("../bench/incidents.txt");

/// The fields of an episode its embedded text is made of.
#[derive(serde::Deserialize)]
struct EpisodeFields {
    issue_type: String,
    issue_description: String,
    #[serde(default)]
    opening_message: Option<String>,
    summary: String,
    #[serde(default)]
    key_findings: Vec<String>,
    root_cause: Option<String>,
}

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
    let incidents: Vec<String> = INCIDENTS
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    let (source, texts) = match std::env::var_os("EMBED_BENCH_EPISODES") {
        Some(path) if !path.is_empty() => {
            let texts = episode_texts(Path::new(&path))?;
            (format!("episodes of {}", Path::new(&path).display()), texts)
        }
        _ => ("bench/incidents.txt".to_owned(), incidents.clone()),
    };
    if texts.is_empty() {
        return Err("no texts to embed".into());
    }
    let rounds: usize = match std::env::var("BENCH_ROUNDS") {
        Ok(v) => v.parse()?,
        Err(_) => 3,
    };
    let batches: Vec<usize> = match std::env::var("EMBED_BENCH_BATCHES") {
        Ok(v) => v
            .split(',')
            .map(|n| n.trim().parse::<usize>())
            .collect::<Result<_, _>>()?,
        Err(_) => vec![1, 16, 64],
    };
    if batches.contains(&0) {
        return Err("EMBED_BENCH_BATCHES: a batch size must be at least 1".into());
    }

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
    // A batch of N figure needs the embedder to hand ONNX Runtime N texts at a time; the
    // batch-1 figure calls it with one text, where the setting does not matter.
    settings.batch_size = batches.iter().copied().max().unwrap_or(1).max(64);

    let started = Instant::now();
    let embedder = LocalEmbedder::load(&settings)?;
    let load_ms = started.elapsed().as_millis();
    let words: usize = texts.iter().map(|t| t.split_whitespace().count()).sum();
    println!(
        "rust fastembed+ort: {} texts ({source}), {:.1} words on average, model {}, loaded in {load_ms} ms",
        texts.len(),
        words as f64 / texts.len() as f64,
        embedder.paths().model_dir.display()
    );

    // Warm-up: the first runs allocate arenas and pick kernels.
    embedder.embed(&texts[..texts.len().min(8)])?;

    // Rounds are the outer loop, so every batch size is measured minutes apart from the others
    // as little as possible: on a shared machine the load moves faster than a whole series.
    let mut walls: Vec<Vec<f64>> = vec![Vec::new(); batches.len()];
    let mut cpus: Vec<Vec<f64>> = vec![Vec::new(); batches.len()];
    for _ in 0..rounds {
        for (i, &size) in batches.iter().enumerate() {
            let (t, cpu) = (Instant::now(), cpu_seconds());
            for chunk in texts.chunks(size) {
                embedder.embed(chunk)?;
            }
            walls[i].push(texts.len() as f64 / t.elapsed().as_secs_f64());
            cpus[i].push((cpu_seconds() - cpu) * 1000.0 / texts.len() as f64);
        }
    }
    let mut figures = Vec::new();
    for (i, &size) in batches.iter().enumerate() {
        let per_second = median(walls[i].clone());
        let cpu_ms = median(cpus[i].clone());
        println!("batch {size:>3}: {per_second:.1} texts/s, {cpu_ms:.1} ms CPU per text");
        figures.push((size, per_second));
    }
    let ceiling = figures.iter().map(|(_, v)| *v).fold(0.0, f64::max);

    let probe = embedder.embed(&[
        "redis evicted keys climbing, payments pods crashloop".to_string(),
        "redis memory eviction caused payment service crashes".to_string(),
        "TLS certificate expired on the ingress".to_string(),
    ])?;
    // The ingest bench only wants the throughput (EMBED_BENCH_PADDING=0).
    let padding = match std::env::var("EMBED_BENCH_PADDING").as_deref() {
        Ok("0") => None,
        _ => Some(padding_check(&embedder, &texts, &incidents)?),
    };
    let peak = peak_rss_mib();
    println!("peak RSS: {peak:.0} MiB");
    println!(
        "sanity: cos(similar) = {:.4}, cos(unrelated) = {:.4}, v0[..4] = {:?}",
        cosine(&probe[0], &probe[1]),
        cosine(&probe[0], &probe[2]),
        &probe[0][..4]
    );
    if let Some(padding) = &padding {
        println!("{padding}");
    }
    let padding = padding.map_or_else(String::new, |p| {
        format!(
            " padding_cos_min={:.5} padding_cos_mean={:.5} padding_top1_changed={} padding_queries={}",
            p.cos_min, p.cos_mean, p.top1_changed, p.queries
        )
    });
    let sizes: String = figures
        .iter()
        .map(|(size, v)| format!(" batch{size}={v:.2}"))
        .collect();
    println!(
        "RESULT impl=rust texts={}{sizes} ceiling={ceiling:.2}{padding} peak_rss_mib={peak:.0}",
        texts.len()
    );
    Ok(())
}

/// The worker's embedded text of each episode in a JSON-lines file.
fn episode_texts(path: &Path) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let content = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    content
        .lines()
        .filter(|line| !line.trim().is_empty())
        .enumerate()
        .map(|(n, line)| {
            let fields: EpisodeFields = serde_json::from_str(line)
                .map_err(|e| format!("{} line {}: {e}", path.display(), n + 1))?;
            Ok(embedding_text(
                &fields.issue_type,
                &fields.issue_description,
                fields.opening_message.as_deref(),
                &fields.summary,
                &fields.key_findings,
                fields.root_cause.as_deref(),
            ))
        })
        .collect()
}

/// What embedding a text inside a padded batch of 64 does, against embedding it alone.
struct Padding {
    cos_min: f32,
    cos_mean: f32,
    /// Queries whose first-ranked text differs between the two sets of vectors.
    top1_changed: usize,
    queries: usize,
    /// The smallest gap between the first and second text of a query (alone vectors): a
    /// shift below it cannot reorder the first place.
    margin_min: f32,
}

impl std::fmt::Display for Padding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "padding: cos(alone, in a batch of 64) min {:.5} mean {:.5}; top-1 changed for {} of \
             {} queries (smallest top-1/top-2 gap {:.4})",
            self.cos_min, self.cos_mean, self.top1_changed, self.queries, self.margin_min
        )
    }
}

fn padding_check(
    embedder: &LocalEmbedder,
    texts: &[String],
    incidents: &[String],
) -> Result<Padding, deja_embed::EmbedError> {
    // Distinct texts only: a duplicate would tie with itself and make the ranking check
    // meaningless.
    let mut unique: Vec<String> = Vec::new();
    for text in texts {
        if !unique.contains(text) {
            unique.push(text.clone());
        }
    }
    let texts = unique.as_slice();
    let mut alone = Vec::with_capacity(texts.len());
    for text in texts {
        alone.extend(embedder.embed(std::slice::from_ref(text))?);
    }
    let mut batched = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(64) {
        batched.extend(embedder.embed(chunk)?);
    }
    let cosines: Vec<f32> = alone
        .iter()
        .zip(&batched)
        .map(|(a, b)| cosine(a, b))
        .collect();
    let cos_min = cosines.iter().copied().fold(f32::INFINITY, f32::min);
    let cos_mean = cosines.iter().sum::<f32>() / cosines.len() as f32;

    // Queries as an agent would send them, embedded alone (a search embeds its query alone).
    let mut queries: Vec<String> = incidents.to_vec();
    queries.extend(
        texts
            .iter()
            .map(|t| t.split(". ").next().unwrap_or(t).to_owned()),
    );
    let mut top1_changed = 0;
    let mut margin_min = f32::INFINITY;
    for query in &queries {
        let q = embedder
            .embed(std::slice::from_ref(query))?
            .pop()
            .unwrap_or_default();
        let ranked_alone = ranking(&q, &alone);
        let ranked_batched = ranking(&q, &batched);
        if ranked_alone.first().map(|r| r.0) != ranked_batched.first().map(|r| r.0) {
            top1_changed += 1;
        }
        if let [first, second, ..] = ranked_alone.as_slice() {
            margin_min = margin_min.min(first.1 - second.1);
        }
    }
    Ok(Padding {
        cos_min,
        cos_mean,
        top1_changed,
        queries: queries.len(),
        margin_min,
    })
}

/// (index, cosine) of every vector against `query`, best first.
fn ranking(query: &[f32], vectors: &[Vec<f32>]) -> Vec<(usize, f32)> {
    let mut ranked: Vec<(usize, f32)> = vectors
        .iter()
        .enumerate()
        .map(|(i, v)| (i, cosine(query, v)))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    ranked
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// User + system CPU time of this process so far, in seconds (0 where there is no procfs):
/// with ONNX Runtime's threads, what the texts cost whatever else the machine runs.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at `state`: utime and stime
    // are the 12th and 13th from there.
    let ticks: f64 = stat
        .rsplit_once(") ")
        .map(|(_, rest)| {
            rest.split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|v| v.parse::<f64>().ok())
                .sum()
        })
        .unwrap_or(0.0);
    // Linux reports these in USER_HZ, 100 on every architecture deja runs on.
    ticks / 100.0
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
