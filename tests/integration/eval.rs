//! `deja eval retrieval` and `deja import`, run as the real binary against the real services.
//! Assertions are properties (ranges, consistency, monotonicity), never the dev corpus's
//! figures, so that retuning the model or the defaults does not break them.

use deja_domain::{EpisodeKey, Provenance, Scope};
use deja_graph::{GraphStore, ListFilter};
use deja_tests::{deja_command, embedding_settings, store_for, test_settings, unique_org};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Stdio;
use tokio::io::AsyncWriteExt;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

fn lines(path: &PathBuf) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("fixture")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("fixture line is json"))
        .collect()
}

/// Test settings whose relative model paths are made absolute (the child runs in `tests/`).
fn settings() -> deja_config::Settings {
    let mut settings = test_settings();
    settings.embedding = embedding_settings();
    settings
}

async fn episodes_of(store: &GraphStore, org: &str) -> Vec<deja_domain::Episode> {
    store
        .list(&Scope::org(org), &ListFilter::default(), 100, 0)
        .await
        .expect("list episodes")
}

/// The first `count` lines of an eval fixture (the original dev set is the first 30
/// incidents and 38 queries).
fn fixture_head(name: &str, count: usize) -> Vec<String> {
    std::fs::read_to_string(fixture(&format!("eval/{name}")))
        .expect("fixture")
        .lines()
        .take(count)
        .map(str::to_owned)
        .collect()
}

/// `lines` written to a file of their own in the temp directory.
fn scratch_file(name: &str, lines: &[String]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("deja-eval-{}-{name}", unique_org()));
    std::fs::write(&path, lines.join("\n")).expect("write the fixture subset");
    path
}

/// `object` has `key` (a report that lost a metric fails), and its value is in [0, 1] or
/// null (a metric a family or query has no case for, e.g. recall of novel queries).
fn in_unit_range(object: &Value, key: &str) -> bool {
    object
        .get(key)
        .is_some_and(|v| v.is_null() || v.as_f64().is_some_and(|v| (0.0..=1.0).contains(&v)))
}

#[tokio::test]
async fn eval_retrieval_scores_every_query_with_sane_and_consistent_metrics() {
    let settings = settings();
    let store = store_for(&settings).await;
    let (incidents, queries) = (
        fixture("eval/incidents.jsonl"),
        fixture("eval/queries.jsonl"),
    );
    let dump = std::env::temp_dir().join(format!("deja-eval-dump-{}.jsonl", unique_org()));
    let output = tokio::process::Command::from(deja_command(&settings))
        .args(["eval", "retrieval", "--json", "--incidents"])
        .arg(&incidents)
        .arg("--queries")
        .arg(&queries)
        .arg("--dump-candidates")
        .arg(&dump)
        .output()
        .await
        .expect("run deja eval retrieval");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("the report is JSON");

    // Every query is accounted for, once.
    let expected: BTreeSet<String> = lines(&queries)
        .iter()
        .map(|q| q["id"].as_str().unwrap().to_owned())
        .collect();
    let reported = report["queries"].as_array().expect("queries");
    let ids: BTreeSet<String> = reported
        .iter()
        .map(|q| q["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(reported.len(), expected.len());
    assert_eq!(ids, expected);
    for query in reported {
        assert!(query["returned"].as_array().unwrap().len() <= 3, "{query}");
        for field in ["recall_at_1", "recall_at_3", "reciprocal_rank"] {
            assert!(in_unit_range(query, field), "{field}: {query}");
        }
    }

    // Families are the corpus's clusters plus `novel`, each with metrics in range.
    let clusters: BTreeSet<String> = lines(&incidents)
        .iter()
        .map(|i| i["cluster"].as_str().unwrap().to_owned())
        .chain(["novel".to_owned()])
        .collect();
    let families = report["families"].as_object().expect("families");
    assert_eq!(families.keys().cloned().collect::<BTreeSet<_>>(), clusters);
    let metrics = [
        "recall_at_1",
        "recall_at_3",
        "mrr",
        "sibling_empty",
        "novel_false_positive",
        "novel_strong",
        "sibling_strong",
    ];
    for summary in families.values().chain([&report["overall"]]) {
        for metric in metrics {
            assert!(in_unit_range(summary, metric), "{metric}: {summary}");
        }
    }
    // A strong novel answer is also an answer: novel-strong never exceeds novel-any.
    let overall = &report["overall"];
    assert!(
        overall["novel_strong"].as_f64().unwrap()
            <= overall["novel_false_positive"].as_f64().unwrap()
    );

    let variants = report["variants"].as_array().expect("variants");
    let row = |prefix: &str| -> &Value {
        variants
            .iter()
            .find(|v| v["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
            .unwrap_or_else(|| panic!("no variant `{prefix}` in {variants:#?}"))
    };
    for variant in variants {
        for part in ["summary", "fold_mean", "fold_sd"] {
            for metric in metrics {
                assert!(in_unit_range(&variant[part], metric), "{metric}: {variant}");
            }
        }
        assert!(
            variant["latency_p50_ms"].as_f64().unwrap()
                <= variant["latency_p95_ms"].as_f64().unwrap()
        );
    }
    // Every row orders or decides the same candidates, so none recalls more of a family
    // than the candidates hold: the reach row (family members first) bounds them all.
    let reach = &row("the candidates' reach")["summary"];
    for variant in variants {
        for metric in ["recall_at_1", "recall_at_3", "mrr"] {
            let (got, bound) = (variant["summary"][metric].as_f64(), reach[metric].as_f64());
            assert!(
                got.unwrap() <= bound.unwrap() + 1e-9,
                "{metric} over the reach: {variant}"
            );
        }
    }
    assert!(reach["recall_at_3"].as_f64().unwrap() > 0.0, "{reach}");
    // The model ranks families well with no abstention (a modest bound, not the corpus
    // figure), and ordering alone never leaves a sibling empty.
    let semantic = &row("semantic (cosine order")["summary"];
    assert!(
        semantic["recall_at_3"].as_f64().unwrap() >= 0.4,
        "{semantic}"
    );
    assert!(semantic["mrr"].as_f64().unwrap() >= 0.5, "{semantic}");
    assert_eq!(semantic["sibling_empty"].as_f64(), Some(0.0));
    // Reranking reorders, it does not filter: every query still gets an answer.
    let reranked = &row("+ late interaction")["summary"];
    assert_eq!(reranked["sibling_empty"].as_f64(), Some(0.0));
    assert_eq!(reranked["novel_false_positive"].as_f64(), Some(1.0));
    // The decision is what abstains: it never answers more novel queries than ordering does.
    let decision = &row("+ decision (strong")["summary"];
    assert!(
        decision["novel_false_positive"].as_f64().unwrap()
            <= reranked["novel_false_positive"].as_f64().unwrap()
    );
    assert_eq!(row("+ decision (strong")["cross_validated"], true);
    // The configured row decides the candidates production decided: the same figures, up to
    // one query or two whose full-text ranks moved between the two requests (BM25
    // statistics span every tenant, and other tests write concurrently).
    let configured = &row("configured")["summary"];
    for metric in [
        "recall_at_3",
        "novel_false_positive",
        "novel_strong",
        "sibling_strong",
    ] {
        let (a, b) = (configured[metric].as_f64(), overall[metric].as_f64());
        let (a, b) = (a.expect("configured"), b.expect("headline"));
        assert!(
            (a - b).abs() <= 0.05,
            "{metric}: configured {a} vs headline {b}"
        );
    }
    // The calibration fitted on every query is a valid configuration.
    for model in ["reranked", "cosine_only"] {
        let m = &report["calibration"][model];
        assert!(
            m["possible"].as_f64().unwrap() <= m["strong"].as_f64().unwrap(),
            "{m}"
        );
    }
    assert_eq!(report["production"]["late_loaded"], true);
    assert_eq!(report["production"]["reranker_loaded"], false);

    // Recurrence links: every incident stood for a new episode, each row's shares are in
    // range, and a link bar (never under the search's `strong`) links no more than the
    // search's own `strong` would, of any kind, on the same held-out incidents.
    let links = &report["links"];
    assert_eq!(
        links["episodes"].as_u64(),
        Some(lines(&incidents).len() as u64),
        "{links}"
    );
    let link_rows = links["rows"].as_array().expect("link rows");
    let link_row = |name: &str| -> &Value {
        link_rows
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("no link row `{name}` in {link_rows:#?}"))
    };
    for r in link_rows {
        for share in ["right", "wrong", "false_link"] {
            assert!(in_unit_range(r, share), "{share}: {r}");
        }
        let linked = r["right"].as_f64().unwrap() + r["wrong"].as_f64().unwrap();
        assert!(linked <= 1.0 + 1e-9, "{r}");
    }
    let own = link_row("the search's own `strong` (no link bar) ᶜᵛ");
    let barred = link_row("link bar fitted per fold ᶜᵛ");
    for share in ["right", "wrong", "false_link"] {
        assert!(
            barred[share].as_f64().unwrap() <= own[share].as_f64().unwrap() + 1e-9,
            "{share}: {barred} vs {own}"
        );
    }
    assert_eq!(
        link_row("configured ([search.recurrence] over [search.recognition])")["cross_validated"],
        false
    );
    for bar in ["reranked", "cosine_only"] {
        assert!(in_unit_range(&links["bar"], bar), "{links}");
    }
    // Late interaction ranks families at least as well as the fused order it reorders.
    let hybrid = &row("hybrid")["summary"];
    assert!(
        reranked["mrr"].as_f64().unwrap() >= hybrid["mrr"].as_f64().unwrap() - 0.05,
        "{reranked} vs {hybrid}"
    );

    // The run wrote into its own namespaces only, as imported episodes.
    let org = report["namespace"].as_str().unwrap();
    assert!(org.starts_with("eval-"));
    let stored = episodes_of(&store, org).await;
    assert_eq!(stored.len(), lines(&incidents).len());
    assert!(stored.iter().all(|e| e.provenance == Provenance::Imported));

    // The dump for offline analysis: one line per query, in order, each candidate with its
    // label, a full feature vector and the cause vector the family order compared.
    let dumped = lines(&dump);
    let _ = std::fs::remove_file(&dump);
    let dumped_ids: Vec<&str> = dumped.iter().map(|d| d["id"].as_str().unwrap()).collect();
    let query_ids: Vec<String> = lines(&queries)
        .iter()
        .map(|q| q["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(dumped_ids, query_ids);
    for line in &dumped {
        let candidates = line["candidates"].as_array().expect("candidates");
        assert!(!candidates.is_empty(), "{line}");
        for candidate in candidates {
            assert!(candidate["relevant"].is_boolean(), "{candidate}");
            assert_eq!(
                candidate["features"].as_array().map(Vec::len),
                Some(deja_domain::recognition::FEATURE_COUNT)
            );
            let cause: Vec<f64> = candidate["cause_vector"]
                .as_array()
                .expect("a cause vector (every imported episode has one)")
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect();
            assert_eq!(cause.len(), 384);
            let norm = cause.iter().map(|x| x * x).sum::<f64>().sqrt();
            assert!((norm - 1.0).abs() < 1e-3, "a unit vector: {norm}");
        }
        // A novel query's candidates are all irrelevant; a sibling query's line says so.
        if line["novel"] == true {
            assert!(candidates.iter().all(|c| c["relevant"] == false), "{line}");
        }
    }
}

/// With `search.verify = "llm"` (the fake LLM standing in for a hosted model) the eval
/// measures the verification stage: the variants end with the verification row, the
/// configured decision of every query sent through the stage, one call per query (the
/// headline stays the calibrated decision's). The fake answers `unsure`, which moves no
/// label, so the row must read exactly as the configured one, only slower. On the original
/// 30 incidents, two folds and no repeats, to keep the run short.
#[tokio::test]
async fn eval_retrieval_with_llm_verification_adds_the_verification_row() {
    let fake = deja_fake_llm::FakeLlm::start().await;
    let mut settings = settings();
    settings.llm.base_url = fake.base_url();
    let (incidents, queries) = (
        scratch_file("incidents.jsonl", &fixture_head("incidents.jsonl", 30)),
        scratch_file("queries.jsonl", &fixture_head("queries.jsonl", 38)),
    );
    let output = tokio::process::Command::from(deja_command(&settings))
        .env("DEJA__SEARCH__VERIFY", "llm")
        .args([
            "eval",
            "retrieval",
            "--json",
            "--folds",
            "2",
            "--repeats",
            "0",
        ])
        .arg("--incidents")
        .arg(&incidents)
        .arg("--queries")
        .arg(&queries)
        .output()
        .await
        .expect("run deja eval retrieval");
    let _ = (
        std::fs::remove_file(&incidents),
        std::fs::remove_file(&queries),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("the report is JSON");
    assert_eq!(
        report["production"]["verify_llm"], true,
        "{:#}",
        report["production"]
    );

    let variants = report["variants"].as_array().expect("variants");
    let verified = variants.last().expect("rows");
    let name = verified["name"].as_str().unwrap_or_default();
    assert!(name.starts_with("+ LLM verify"), "the last row: {name}");
    assert!(!name.contains("unavailable"), "every call answered: {name}");
    assert_eq!(verified["cross_validated"], false);
    let configured = variants
        .iter()
        .find(|v| {
            v["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("configured"))
        })
        .expect("the configured row");
    assert_eq!(
        verified["summary"], configured["summary"],
        "`unsure` moves nothing"
    );
    assert!(
        verified["latency_p50_ms"].as_f64().unwrap()
            >= configured["latency_p50_ms"].as_f64().unwrap(),
        "the call's time is added: {verified:#} vs {configured:#}"
    );

    // One call per query the configured decision answers, about the leads a search shows
    // (at most the default limit, 3). Those decisions are the headline's but for a query or
    // two whose full-text ranks moved between the requests (other tests write concurrently).
    let shown: Vec<usize> = fake
        .requests()
        .iter()
        .filter(|r| r.kind == deja_fake_llm::RequestKind::Verification)
        .map(|r| {
            r.message("user")
                .unwrap_or_default()
                .matches("<past-incident id=")
                .count()
        })
        .collect();
    let answered = report["queries"]
        .as_array()
        .expect("queries")
        .iter()
        .filter(|q| q["returned"].as_array().is_some_and(|r| !r.is_empty()))
        .count() as i64;
    assert!(answered > 0);
    assert!(shown.iter().all(|n| (1..=3).contains(n)), "{shown:?}");
    assert!(
        (shown.len() as i64 - answered).abs() <= 2,
        "{} calls for {answered} answered queries",
        shown.len()
    );
}

/// `--extracted`: the same queries also search the memory a model extracted from the
/// incidents' conversations (the fixture the local model wrote); the report scores that
/// memory on its own (its queries are the ones whose family it holds, plus the novel ones)
/// beside the curated records, and a record that names no incident of the corpus is refused.
/// On the original 30 incidents, two folds and one repeat, to keep the run short.
#[tokio::test]
async fn eval_retrieval_scores_the_extracted_memory_beside_the_curated_records() {
    let settings = settings();
    let ids_of = |lines: &[String]| -> BTreeSet<String> {
        lines
            .iter()
            .map(|l| {
                serde_json::from_str::<Value>(l).expect("json")["id"]
                    .as_str()
                    .expect("id")
                    .to_owned()
            })
            .collect()
    };
    let incidents = fixture_head("incidents.jsonl", 30);
    let queries = fixture_head("queries.jsonl", 38);
    let ids = ids_of(&incidents);
    // Part of the first 30 incidents' episodes: some families held whole, some in part,
    // some not at all (their sibling queries are left out).
    let extracted: Vec<String> = lines(&fixture("eval/extracted-qwen2.5-1.5b.jsonl"))
        .into_iter()
        .filter(|r| ids.contains(r["id"].as_str().unwrap_or_default()))
        .take(12)
        .map(|r| r.to_string())
        .collect();
    assert!(
        extracted.len() >= 5,
        "the fixture holds {} of the first 30",
        extracted.len()
    );
    let held = ids_of(&extracted);
    let (mut siblings, mut novel) = (0, 0);
    for q in &queries {
        let q: Value = serde_json::from_str(q).expect("json");
        let relevant: Vec<&str> = q["relevant"]
            .as_array()
            .expect("relevant")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        if relevant.is_empty() {
            novel += 1;
        } else if relevant.iter().any(|id| held.contains(*id)) {
            siblings += 1;
        }
    }
    assert!(
        siblings > 0 && siblings + novel < 38,
        "some sibling queries find their family, some do not"
    );
    let paths = (
        scratch_file("incidents.jsonl", &incidents),
        scratch_file("queries.jsonl", &queries),
        scratch_file("extracted.jsonl", &extracted),
    );
    let run = |extracted: &PathBuf| {
        tokio::process::Command::from(deja_command(&settings))
            .args([
                "eval",
                "retrieval",
                "--json",
                "--folds",
                "2",
                "--repeats",
                "1",
            ])
            .arg("--incidents")
            .arg(&paths.0)
            .arg("--queries")
            .arg(&paths.1)
            .arg("--extracted")
            .arg(extracted)
            .output()
    };

    let output = run(&paths.2).await.expect("run deja eval retrieval");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("the report is JSON");
    let memory = &report["extracted"];
    assert_eq!(memory["incidents"], extracted.len(), "{memory:#}");
    assert_ne!(memory["namespace"], report["namespace"]);
    let overall = &memory["overall"];
    assert_eq!(overall["sibling_queries"], siblings, "{overall:#}");
    assert_eq!(overall["novel_queries"], novel, "{overall:#}");
    assert_eq!(
        report["overall"]["sibling_queries"].as_u64(),
        Some(38 - novel as u64)
    );
    for key in [
        "recall_at_1",
        "recall_at_3",
        "mrr",
        "sibling_empty",
        "novel_false_positive",
        "novel_strong",
        "sibling_strong",
    ] {
        assert!(in_unit_range(overall, key), "{key}: {overall:#}");
    }
    // The same rows as the curated table, each scored over the extracted memory's queries.
    let names = |rows: &Value| -> Vec<String> {
        rows.as_array()
            .expect("rows")
            .iter()
            .map(|r| r["name"].as_str().expect("name").to_owned())
            .collect()
    };
    assert_eq!(names(&memory["variants"]), names(&report["variants"]));
    assert_eq!(names(&memory["repeated"]), names(&report["repeated"]));
    for row in memory["variants"].as_array().expect("rows") {
        assert_eq!(row["summary"]["sibling_queries"], siblings, "{row:#}");
        assert!(in_unit_range(&row["summary"], "recall_at_1"), "{row:#}");
    }

    // A record of an incident the corpus does not have is refused, naming it.
    let stranger = extracted[0].replacen(
        &format!(
            "\"id\":{}",
            serde_json::to_string(held.iter().next().expect("one")).expect("json")
        ),
        "\"id\":\"inc-not-in-the-corpus\"",
        1,
    );
    assert_ne!(stranger, extracted[0], "the id was replaced");
    let strangers = scratch_file("strangers.jsonl", &[stranger]);
    let output = run(&strangers).await.expect("run deja eval retrieval");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("inc-not-in-the-corpus"), "{stderr}");
    for path in [&paths.0, &paths.1, &paths.2, &strangers] {
        let _ = std::fs::remove_file(path);
    }
}

async fn import(
    settings: &deja_config::Settings,
    file: &PathBuf,
    org: &str,
) -> std::process::Output {
    tokio::process::Command::from(deja_command(settings))
        .args(["import", "--yes", "--org", org])
        .arg(file)
        .output()
        .await
        .expect("run deja import")
}

#[tokio::test]
async fn import_yes_writes_valid_records_reports_bad_lines_and_updates_on_reimport() {
    let settings = settings();
    let store = store_for(&settings).await;
    let org = unique_org();
    let file = fixture("import.one-invalid-line.jsonl");
    let output = import(&settings, &file, &org).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(
        !output.status.success(),
        "a skipped line fails the run: {stderr}"
    );
    assert!(
        stdout.contains("imported 2, declined 0, invalid 1"),
        "{stdout}"
    );
    assert!(stderr.contains("1 invalid records skipped"), "{stderr}");
    assert!(
        stderr.contains("import.one-invalid-line.jsonl:2: skipped"),
        "the bad line is named by number: {stderr}"
    );
    // The valid records of the fixture (its broken line is not JSON).
    let records: Vec<Value> = std::fs::read_to_string(&file)
        .expect("fixture")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(records.len(), 2);
    let first_id = records[0]["id"].as_str().unwrap();
    let stored = episodes_of(&store, &org).await;
    assert_eq!(stored.len(), 2);
    assert!(stored.iter().all(|e| e.provenance == Provenance::Imported));

    // The same id again, with a new summary: the same episode is updated, not duplicated.
    let mut changed = records[0].clone();
    changed["summary"] = Value::from("A rewritten summary after review.");
    let again = std::env::temp_dir().join(format!("deja-reimport-{org}.jsonl"));
    std::fs::write(&again, format!("{changed}\n")).expect("write temp file");
    let output = import(&settings, &again, &org).await;
    let _ = std::fs::remove_file(&again);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stored = episodes_of(&store, &org).await;
    assert_eq!(stored.len(), 2, "re-import updates in place");
    let episode = store
        .get_by_key(&EpisodeKey::new(&org, first_id))
        .await
        .expect("read")
        .expect("the episode");
    assert_eq!(episode.summary, "A rewritten summary after review.");
    let (before, after) = (
        &records[0]["created"],
        episode.created_at.date_naive().to_string(),
    );
    assert_eq!(before.as_str(), Some(after.as_str()), "created is kept");
}

/// The valid records of `import.one-invalid-line.jsonl` (its broken line is not JSON).
fn valid_records() -> Vec<Value> {
    std::fs::read_to_string(fixture("import.one-invalid-line.jsonl"))
        .expect("fixture")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// `records` as a JSON-lines file of its own in the temp directory.
fn records_file(name: &str, records: &[Value]) -> PathBuf {
    let lines: Vec<String> = records.iter().map(Value::to_string).collect();
    scratch_file(name, &lines)
}

/// Runs `deja episode ARGS --json`; returns (success, envelope).
async fn deja_episode(settings: &deja_config::Settings, args: &[&str]) -> (bool, Value) {
    let output = tokio::process::Command::from(deja_command(settings))
        .arg("episode")
        .args(args)
        .arg("--json")
        .output()
        .await
        .expect("run deja episode");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let json = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "not json ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.success(), json)
}

async fn stored(store: &GraphStore, org: &str, id: &str) -> deja_domain::Episode {
    store
        .get_by_key(&EpisodeKey::new(org, id))
        .await
        .expect("read")
        .expect("the episode")
}

#[tokio::test]
async fn reimport_keeps_what_people_did_to_an_imported_episode_and_skips_unchanged_records() {
    let settings = settings();
    let store = store_for(&settings).await;
    let org = unique_org();
    let records = valid_records();
    assert_eq!(records.len(), 2);
    let (first, second) = (
        records[0]["id"].as_str().unwrap(),
        records[1]["id"].as_str().unwrap(),
    );
    let file = records_file("reviewed.jsonl", &records);
    let output = import(&settings, &file, &org).await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let imported = stored(&store, &org, first).await;
    assert!(imported.root_cause.is_some());

    // A person marks the first episode wrong, corrects its summary and confirms it.
    let (ok, wrong) = deja_episode(
        &settings,
        &[
            "mark-wrong",
            &imported.id,
            "--org",
            &org,
            "--note",
            "the replica was undersized after all",
        ],
    )
    .await;
    assert!(ok, "{wrong}");
    let version = stored(&store, &org, first).await.version.to_string();
    let summary = "Reviewed: the fleet reconnected in lockstep; the cause is still open.";
    let (ok, edited) = deja_episode(
        &settings,
        &[
            "edit",
            &imported.id,
            "--org",
            &org,
            "--if-match",
            &version,
            "--summary",
            summary,
        ],
    )
    .await;
    assert!(ok, "{edited}");
    let (ok, confirmed) = deja_episode(&settings, &["confirm", &imported.id, "--org", &org]).await;
    assert!(ok, "{confirmed}");
    let reviewed = stored(&store, &org, first).await;
    assert!(reviewed.review.is_wrong());
    assert!(reviewed.last_confirmed_at > imported.last_confirmed_at);
    let untouched = stored(&store, &org, second).await;

    // The file grew: the same records and a new one, imported again.
    let mut grown = records.clone();
    let mut new = records[1].clone();
    new["id"] = Value::from(format!("{second}-again"));
    grown.push(new);
    let grown_file = records_file("grown.jsonl", &grown);
    let output = import(&settings, &grown_file, &org).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let after = stored(&store, &org, first).await;
    assert_eq!(after.review.verdict.as_deref(), Some("wrong"), "{after:#?}");
    assert_eq!(
        after.review.verdict_note.as_deref(),
        Some("the replica was undersized after all")
    );
    assert!(!deja_domain::review::is_strategy_source(&after));
    assert_eq!(after.summary, summary, "the person's edit stays");
    assert!(after.review.human_pinned.contains("summary"));
    assert_eq!(
        after.review.proposals.get("summary"),
        Some(&records[0]["summary"]),
        "the record's value is proposed beside it"
    );
    assert_eq!(after.root_cause, None, "still marked wrong");
    assert!(
        !after.review.proposals.contains_key("root_cause"),
        "the cause marked wrong is not proposed back: {:?}",
        after.review.proposals
    );
    assert!(
        after
            .ruled_out
            .iter()
            .any(|item| Some(item.as_str()) == imported.root_cause.as_deref()),
        "the cause marked wrong stays ruled out: {:?}",
        after.ruled_out
    );
    assert_eq!(after.last_confirmed_at, reviewed.last_confirmed_at);
    assert_eq!(after.created_at, imported.created_at);
    assert_eq!(after.embedding_model, reviewed.embedding_model);
    // The record nobody touched, imported again unchanged: no new version.
    assert_eq!(
        stored(&store, &org, second).await.version,
        untouched.version
    );
    assert!(stdout.contains("unchanged 1"), "{stdout}");
    assert_eq!(episodes_of(&store, &org).await.len(), 3);

    // Once more: nothing changes, nothing is written.
    let output = import(&settings, &grown_file, &org).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("imported 0,"), "{stdout}");
    assert!(stdout.contains("unchanged 3"), "{stdout}");
    assert_eq!(stored(&store, &org, first).await.version, after.version);

    // A person deletes one: the file still holds its record, and a re-import leaves the
    // deletion standing, as it leaves every other review — unless asked to restore it.
    let gone = stored(&store, &org, second).await;
    let record =
        deja_graph::ReviewRecord::new("ana", "delete", &serde_json::json!([]), chrono::Utc::now());
    store
        .delete_episode(&org, &gone.id, None, None, &record)
        .await
        .unwrap()
        .expect("deleted");
    let output = import(&settings, &grown_file, &org).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("deleted by a person 1"), "{stdout}");
    assert!(stderr.contains("--restore-deleted"), "{stderr}");
    assert_eq!(episodes_of(&store, &org).await.len(), 2);
    let restored = tokio::process::Command::from(deja_command(&settings))
        .args(["import", "--yes", "--restore-deleted", "--org", &org])
        .arg(&grown_file)
        .output()
        .await
        .expect("run deja import");
    let stdout = String::from_utf8_lossy(&restored.stdout);
    assert!(restored.status.success(), "{stdout}");
    assert!(stdout.contains("imported 1,"), "{stdout}");
    assert_eq!(episodes_of(&store, &org).await.len(), 3);
    for path in [file, grown_file] {
        let _ = std::fs::remove_file(path);
    }
}

#[tokio::test]
async fn import_reports_a_repeated_id_keeps_the_first_and_refuses_a_conversations_episode() {
    let settings = settings();
    let store = store_for(&settings).await;
    let org = unique_org();
    let records = valid_records();
    let id = records[0]["id"].as_str().unwrap();
    let mut repeated = records[0].clone();
    repeated["summary"] = Value::from("The later line with the same id.");
    let file = records_file(
        "repeated.jsonl",
        &[records[0].clone(), records[1].clone(), repeated],
    );
    let output = import(&settings, &file, &org).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(!output.status.success(), "a repeated id fails the run");
    assert!(
        stderr.contains(":3: skipped: duplicate id") && stderr.contains("first on line 1"),
        "{stderr}"
    );
    assert!(
        stdout.contains("imported 2, declined 0, invalid 1"),
        "{stdout}"
    );
    assert_eq!(
        stored(&store, &org, id).await.summary,
        records[0]["summary"]
    );
    assert_eq!(stored(&store, &org, id).await.version, 1, "written once");

    // An id that names an agent conversation's episode: refused, the conversation intact.
    let conversation = deja_tests::sample_episode(
        &org,
        "checkout",
        "conv-live",
        deja_tests::random_unit_vector(deja_tests::random_seed()),
    );
    store.save(&conversation, None).await.expect("save");
    let mut clash = records[1].clone();
    clash["id"] = Value::from("conv-live");
    let clash_file = records_file("clash.jsonl", &[clash]);
    let output = import(&settings, &clash_file, &org).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(!output.status.success(), "{stdout}");
    assert!(stderr.contains("agent conversation"), "{stderr}");
    assert!(
        stdout.contains("imported 0,") && stdout.contains("refused 1"),
        "{stdout}"
    );
    let kept = stored(&store, &org, "conv-live").await;
    assert_eq!(kept.provenance, Provenance::Extracted);
    assert_eq!(kept.event_ids, conversation.event_ids);
    assert_eq!(kept.summary, conversation.summary);

    // An org of blanks is refused before anything is read or written.
    let output = tokio::process::Command::from(deja_command(&settings))
        .args(["import", "--yes", "--org", "   "])
        .arg(&file)
        .output()
        .await
        .expect("run deja import");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("--org"), "{stderr}");
    for path in [file, clash_file] {
        let _ = std::fs::remove_file(path);
    }
}

#[tokio::test]
async fn import_without_yes_writes_nothing_when_the_answer_is_no() {
    let settings = settings();
    let store = store_for(&settings).await;
    let org = unique_org();
    let mut child = tokio::process::Command::from(deja_command(&settings))
        .args(["import", "--org", &org])
        .arg(fixture("import.one-invalid-line.jsonl"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start deja import");
    let mut stdin = child.stdin.take().expect("stdin");
    // One answer for two records: the input ends before the second is answered.
    stdin.write_all(b"n\n").await.expect("answer");
    drop(stdin);
    let output = child.wait_with_output().await.expect("deja import ends");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stdout.contains("import this record?"), "it asked: {stdout}");
    assert!(stdout.contains("imported 0, declined 1"), "{stdout}");
    assert!(
        stderr.contains("1 records not imported: the input ended"),
        "{stderr}"
    );
    assert!(episodes_of(&store, &org).await.is_empty());
}

/// Input that ends before the first answer: one question, then every record counted as not
/// imported, not 30 previews and prompts nobody answers.
#[tokio::test]
async fn import_whose_input_ends_asks_once_and_counts_the_rest_unanswered() {
    let settings = settings();
    let store = store_for(&settings).await;
    let org = unique_org();
    let output = tokio::process::Command::from(deja_command(&settings))
        .args(["import", "--org", &org])
        .arg(fixture("incidents.sample.jsonl"))
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run deja import");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert_eq!(stdout.matches("import this record?").count(), 1, "{stdout}");
    assert!(
        stderr.contains("30 records not imported: the input ended"),
        "{stderr}"
    );
    assert!(episodes_of(&store, &org).await.is_empty());
}

/// `deja eval extraction --json` over these dev incidents' conversations.
fn eval_extraction(settings: &deja_config::Settings, only: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::from(deja_command(settings));
    command
        .args(["eval", "extraction", "--json", "--transcripts"])
        .arg(fixture("eval/transcripts.jsonl"))
        .arg("--incidents")
        .arg(fixture("eval/incidents.jsonl"))
        .args(["--only", &only.join(","), "--turn-timeout-secs", "120"]);
    command
}

/// `deja eval extraction` with the fake LLM: conversations replayed several at once still
/// merge every turn in order and are each scored once; `--resume` continues a run from its
/// report (into its namespace, replaying only what it did not score, reporting over both);
/// a deadline that has passed replays nothing and says which flag stopped it.
#[tokio::test]
async fn eval_extraction_replays_conversations_in_parallel_and_scores_each_once() {
    let fake = deja_fake_llm::FakeLlm::start().await;
    let settings = deja_tests::worker_app::worker_settings(&fake.base_url());
    let only = ["inc-dev-001", "inc-dev-016", "inc-dev-021", "inc-dev-003"];
    let run = |only: &[&str], extra: &[&str]| eval_extraction(&settings, only).args(extra).output();
    let scored = |report: &Value| -> BTreeSet<String> {
        report["conversations"]
            .as_array()
            .expect("conversations")
            .iter()
            .map(|c| c["incident"].as_str().expect("incident").to_owned())
            .collect()
    };

    let output = run(&only[..3], &["--parallel", "3"])
        .await
        .expect("run deja eval extraction");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("the report is JSON");
    assert_eq!(report["parallel"], 3, "{report:#}");
    assert_eq!(report["runs"], 1, "{report:#}");
    assert_eq!(report["skipped_conversations"], 0, "{report:#}");
    let summary = &report["summary"];
    assert_eq!(summary["conversations"], 3, "{summary:#}");
    assert_eq!(summary["episodes_ok"], 3, "{summary:#}");
    assert_eq!(summary["turns_not_merged"], 0, "{summary:#}");
    assert_eq!(
        scored(&report),
        only[..3].iter().map(|s| (*s).to_owned()).collect()
    );
    assert!(stderr.contains("3 at once"), "{stderr}");
    // All three start with a wrong hypothesis: each is read against its early one.
    assert_eq!(summary["revised_conversations"], 3, "{summary:#}");
    assert_eq!(summary["revisions_measured_left"], 3, "{summary:#}");
    for conversation in report["conversations"].as_array().expect("conversations") {
        assert!(
            conversation["first_root_cause"].is_string()
                && conversation["revision_left_hypothesis"].is_boolean(),
            "{conversation:#}"
        );
        // What the episode ruled out is scored, and only its own items can name the cause.
        let ruled_out = conversation["ruled_out"].as_array().expect("ruled_out");
        let naming = conversation["ruled_out_naming_cause"]
            .as_array()
            .expect("ruled_out_naming_cause");
        assert!(
            naming.iter().all(|item| ruled_out.contains(item)),
            "{conversation:#}"
        );
    }
    let items: usize = report["conversations"]
        .as_array()
        .expect("conversations")
        .iter()
        .map(|c| c["ruled_out"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(summary["ruled_out_items"], items, "{summary:#}");

    let namespace = report["namespace"].as_str().expect("namespace");
    // Its queues were deleted once its worker stopped: nobody else consumed them.
    assert!(!stderr.contains("left in place"), "{stderr}");
    let mut rabbit = settings.rabbitmq.clone();
    rabbit.name_prefix = format!("deja.{namespace}");
    rabbit.exchange = format!("deja.{namespace}.turns");
    let bus = deja_bus::Bus::connect(&rabbit).await.expect("rabbitmq");
    assert!(
        bus.queue_depth(&rabbit.extract_queue()).await.is_err(),
        "the run's queue is deleted"
    );
    let earlier = std::env::temp_dir().join(format!("{namespace}.json"));
    std::fs::write(&earlier, &output.stdout).expect("write the report");
    let resume = earlier.to_str().expect("utf-8 path");
    let records = std::env::temp_dir().join(format!("{namespace}.records.jsonl"));
    let output = run(
        &only,
        &[
            "--resume",
            resume,
            "--records",
            records.to_str().expect("utf-8 path"),
        ],
    )
    .await
    .expect("run deja eval extraction --resume");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("replaying 1 conversations"), "{stderr}");
    // `--records`: every scored conversation's episode (earlier runs' too) as a record of its
    // incident, in the incident's org and labelled with its family, importable as is.
    let store = store_for(&settings).await;
    let gold: Vec<Value> = lines(&fixture("eval/incidents.jsonl"));
    let written = lines(&records);
    assert_eq!(written.len(), only.len(), "{stderr}");
    for line in &written {
        let record = deja_domain::import::IncidentRecord::parse(&line.to_string())
            .expect("an importable record");
        let incident = gold
            .iter()
            .find(|g| g["id"] == record.id.as_str())
            .expect("a corpus incident");
        assert_eq!(line["cluster"], incident["cluster"], "{line:#}");
        assert_eq!(record.org, incident["org"].as_str().expect("org"));
        let stored = store
            .get_by_key(&EpisodeKey::new(namespace, format!("conv-{}", record.id)))
            .await
            .expect("read")
            .expect("the episode is stored");
        assert_eq!(record.root_cause, stored.root_cause);
        assert_eq!(record.issue_description, stored.issue_description);
        assert_eq!(record.summary, stored.summary);
        // The findings are embedded with the episode, so the record carries them too.
        assert_eq!(record.key_findings, stored.key_findings);
        assert_eq!(
            record
                .to_episode(chrono::Utc::now())
                .expect("episode")
                .embedding_text(),
            stored.embedding_text()
        );
    }
    let _ = std::fs::remove_file(&records);
    let resumed: Value = serde_json::from_slice(&output.stdout).expect("the report is JSON");
    assert_eq!(resumed["namespace"], report["namespace"], "{resumed:#}");
    assert_eq!(resumed["runs"], 2, "{resumed:#}");
    assert_eq!(
        resumed["summary"]["conversations"],
        only.len(),
        "{resumed:#}"
    );
    assert_eq!(resumed["summary"]["episodes_ok"], only.len(), "{resumed:#}");
    assert_eq!(
        scored(&resumed),
        only.iter().map(|s| (*s).to_owned()).collect()
    );
    // The end-to-end queries search all four episodes: the earlier run's are in the store.
    let end_to_end = &resumed["end_to_end"]["overall"];
    assert!(
        end_to_end["sibling_queries"].as_u64().unwrap_or(0) > 0,
        "{end_to_end:#}"
    );

    // Another model's report is refused rather than mixed into one table.
    let mut other_model = report.clone();
    other_model["llm_model"] = "another-model".into();
    std::fs::write(&earlier, other_model.to_string()).expect("write the report");
    let output = run(&only, &["--resume", resume])
        .await
        .expect("run deja eval extraction --resume");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("another-model"), "{stderr}");
    let _ = std::fs::remove_file(&earlier);

    let output = run(&only, &["--max-minutes", "0"])
        .await
        .expect("run deja eval extraction");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--max-minutes"), "{stderr}");
}

/// Ctrl-C during `deja eval extraction` starts no more conversation, lets the one in flight
/// finish and reports what was replayed, as the `--max-minutes` deadline does: hours of LLM
/// time are not thrown away.
#[tokio::test]
async fn eval_extraction_interrupted_reports_what_it_replayed() {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
    let fake = deja_fake_llm::FakeLlm::start().await;
    // Slow enough that the first conversation is still in flight when the signal comes.
    fake.set_default(deja_fake_llm::Reply::Stall(
        std::time::Duration::from_millis(700),
    ));
    let settings = deja_tests::worker_app::worker_settings(&fake.base_url());
    let mut child = eval_extraction(&settings, &["inc-dev-001", "inc-dev-016", "inc-dev-021"])
        .args(["--parallel", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start deja eval extraction");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut seen = String::new();
    // The first turn's progress line: a conversation is in flight.
    while let Some(line) = stderr.next_line().await.expect("read stderr") {
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("turns, conversation 1/") {
            break;
        }
    }
    let pid = child.id().expect("running");
    let killed = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .expect("send SIGINT");
    assert!(killed.success());
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut stdout)
        .await
        .expect("read stdout");
    while let Some(line) = stderr.next_line().await.expect("read stderr") {
        seen.push_str(&line);
        seen.push('\n');
    }
    let status = child.wait().await.expect("deja eval extraction ends");
    assert!(status.success(), "{seen}");
    assert!(
        seen.contains("interrupted: no more conversation starts"),
        "{seen}"
    );
    let report: Value = serde_json::from_str(&stdout).expect("the report is JSON");
    assert_eq!(report["summary"]["conversations"], 1, "{report:#}");
    assert_eq!(report["skipped_conversations"], 2, "{report:#}");
    assert_eq!(report["summary"]["episodes_ok"], 1, "{report:#}");
}

/// A turn whose extraction fails for good (the model's context overflows) is merged as an
/// error beside the earlier conclusion: the report names it, rather than counting the
/// conversation as fully extracted.
#[tokio::test]
async fn eval_extraction_reports_a_turn_whose_extraction_failed() {
    let fake = deja_fake_llm::FakeLlm::start().await;
    fake.push(deja_fake_llm::Reply::Auto);
    fake.push(deja_fake_llm::Reply::ContextOverflow);
    let settings = deja_tests::worker_app::worker_settings(&fake.base_url());
    let output = eval_extraction(&settings, &["inc-dev-002"])
        .output()
        .await
        .expect("run deja eval extraction");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("the report is JSON");
    let conversation = &report["conversations"][0];
    assert_eq!(
        conversation["failed_turns"],
        serde_json::json!([2]),
        "{report:#}"
    );
    assert_eq!(
        conversation["lost_turns"],
        serde_json::json!([]),
        "{report:#}"
    );
    assert_eq!(conversation["status"], "ok", "{report:#}");
    assert_eq!(report["summary"]["turns_failed"], 1, "{report:#}");
    assert!(stderr.contains("this turn failed"), "{stderr}");
}
