//! `deja eval retrieval`: imports labelled incidents into fresh org namespaces with the
//! import command's own code, runs every query through the production search path and
//! compares ranking variants on the same ranked lists (docs/EVALUATION.md).

use super::corpus::{self, EvalQuery, Incidents};
use super::report::{self, Headline};
use super::search;
use super::variants::{self, Lists, Variant};
use crate::commands::import::import_one;
use anyhow::Context;
use chrono::Utc;
use deja_api::Mode;
use deja_config::Settings;
use deja_embed::{embed_blocking, Embedder};
use deja_graph::GraphStore;
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(clap::Args)]
pub struct RetrievalArgs {
    /// Labelled incident records (the `deja import` format plus `cluster`).
    #[arg(long)]
    incidents: PathBuf,
    /// Queries: `{id, team, query, relevant}` per line.
    #[arg(long)]
    queries: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Floors compared in the variants table (the configured floor is always added).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.30,0.35,0.40,0.45,0.50,0.55"
    )]
    floors: Vec<f64>,
    /// Half-life of the recency-decay variant, in days.
    #[arg(long, default_value_t = 90.0)]
    half_life_days: f64,
}

#[derive(Serialize)]
struct Namespaces {
    all_fields: String,
    symptoms_only: String,
}

#[derive(Serialize)]
struct Production {
    similarity_floor: f64,
    recency_half_life_days: f64,
    recency_weight: f64,
    default_limit: usize,
}

#[derive(Serialize)]
struct RetrievalReport {
    namespaces: Namespaces,
    production: Production,
    incidents: usize,
    #[serde(flatten)]
    headline: Headline,
    variants: Vec<Variant>,
}

pub async fn run(settings: &Settings, args: RetrievalArgs) -> anyhow::Result<()> {
    let incidents = Incidents::load(&args.incidents)?;
    let queries = corpus::load_queries(&args.queries, &incidents)?;
    if args.floors.iter().any(|f| !(0.0..=1.0).contains(f)) || args.half_life_days <= 0.0 {
        anyhow::bail!("floors must be within 0..=1 and the half-life positive");
    }
    let store = super::super::connect_store(settings).await?;
    let embedder = super::super::load_embedder(settings)?;
    super::super::check_dimensions(&store, embedder.as_ref()).await?;

    let namespaces = Namespaces {
        all_fields: corpus::namespace("retrieval"),
        symptoms_only: corpus::namespace("retrieval-symptoms"),
    };
    import(&store, &embedder, &incidents, &namespaces.all_fields, false).await?;
    import(
        &store,
        &embedder,
        &incidents,
        &namespaces.symptoms_only,
        true,
    )
    .await?;

    // Imported episodes keep the record id as correlation id.
    let incident_of: HashMap<String, String> = incidents
        .records
        .iter()
        .map(|(_, r)| (r.id.clone(), r.id.clone()))
        .collect();
    let production = search::service(&store, &embedder, &settings.search);
    eprintln!("running {} queries...", queries.len());
    let answers =
        search::production_answers(&production, &namespaces.all_fields, &queries, &incident_of)
            .await?;
    let headline = report::headline(&queries, &incidents, &answers);
    let lists = variant_lists(
        settings,
        &store,
        &embedder,
        &namespaces,
        &queries,
        &incident_of,
        args.half_life_days,
    )
    .await?;
    let variants = variants::compare(
        &queries,
        &lists,
        &args.floors,
        args.half_life_days,
        &settings.search,
    );
    warn_if_production_differs(&headline, &variants);

    let report = RetrievalReport {
        production: Production {
            similarity_floor: settings.search.similarity_floor,
            recency_half_life_days: settings.search.recency_half_life_days,
            recency_weight: settings.search.recency_weight,
            default_limit: settings.search.default_limit,
        },
        namespaces,
        incidents: incidents.records.len(),
        headline,
        variants,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print(&report);
    }
    Ok(())
}

/// Writes every record into `org` through `import_one`, the import command's write path.
/// `symptoms_only` embeds the `symptoms` field alone (the description when there is none)
/// instead of the production embedding text: `import_one` keeps a vector it is given.
async fn import(
    store: &GraphStore,
    embedder: &Arc<dyn Embedder>,
    incidents: &Incidents,
    org: &str,
    symptoms_only: bool,
) -> anyhow::Result<()> {
    eprintln!(
        "importing {} incidents into {org} ({})...",
        incidents.records.len(),
        if symptoms_only {
            "symptoms only"
        } else {
            "all fields"
        }
    );
    let now = Utc::now();
    let mut episodes = Vec::with_capacity(incidents.records.len());
    for (line, record) in &incidents.records {
        let mut record = record.clone();
        record.org = org.to_owned();
        let episode = record
            .to_episode(now)
            .map_err(|e| anyhow::anyhow!("line {line}: {e}"))?;
        episodes.push((record, episode));
    }
    if symptoms_only {
        let texts = episodes
            .iter()
            .map(|(record, episode)| {
                record
                    .symptoms
                    .clone()
                    .filter(|s| !s.trim().is_empty())
                    .unwrap_or_else(|| episode.issue_description.clone())
            })
            .collect();
        let vectors = embed_blocking(embedder.clone(), texts).await?;
        for ((_, episode), vector) in episodes.iter_mut().zip(vectors) {
            episode.embedding = Some(vector);
            episode.embedding_model = Some(embedder.model_id().to_owned());
        }
    }
    for (record, episode) in episodes {
        import_one(store, embedder, episode)
            .await
            .with_context(|| format!("importing {}", record.id))?;
    }
    Ok(())
}

/// The ranked lists the variants are computed from, per query: every episode the semantic
/// search returns with no floor (so that any floor can be applied afterwards, exactly), with
/// and without recency, in both namespaces; and the full-text list.
async fn variant_lists(
    settings: &Settings,
    store: &GraphStore,
    embedder: &Arc<dyn Embedder>,
    namespaces: &Namespaces,
    queries: &[EvalQuery],
    incident_of: &HashMap<String, String>,
    half_life_days: f64,
) -> anyhow::Result<Vec<Lists>> {
    let mut unfloored = settings.search.clone();
    // Below any cosine: the floor is applied afterwards, per variant.
    unfloored.similarity_floor = -1.0;
    unfloored.recency_half_life_days = 0.0;
    let mut with_recency = unfloored.clone();
    with_recency.recency_half_life_days = half_life_days;
    let plain = search::service(store, embedder, &unfloored);
    let recency = search::service(store, embedder, &with_recency);
    let production = search::service(store, embedder, &settings.search);
    let everything = Some(settings.search.max_limit);
    let depth = Some(super::metrics::MRR_DEPTH);
    let (all, symptoms) = (&namespaces.all_fields, &namespaces.symptoms_only);
    let mut lists = Vec::with_capacity(queries.len());
    for query in queries {
        lists.push(Lists {
            all_fields: search::run(&plain, all, query, None, everything, incident_of).await?,
            recency: search::run(&recency, all, query, None, everything, incident_of).await?,
            symptoms_only: search::run(&plain, symptoms, query, None, everything, incident_of)
                .await?,
            text: search::run(
                &production,
                all,
                query,
                Some(Mode::Text),
                depth,
                incident_of,
            )
            .await?,
        });
    }
    Ok(lists)
}

/// The variant matching the production settings must reproduce the headline: if it does
/// not, the variants are not computed the way production ranks and the table would mislead.
fn warn_if_production_differs(headline: &Headline, variants: &[Variant]) {
    let Some(production) = variants.iter().find(|v| v.production) else {
        return;
    };
    let (a, b) = (&headline.overall, &production.summary);
    let close = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) => (x - y).abs() < 1e-9,
        (x, y) => x == y,
    };
    if !(close(a.recall_at_3, b.recall_at_3)
        && close(a.novel_false_positive, b.novel_false_positive))
    {
        eprintln!(
            "warning: the production row of the variants table differs from the headline \
             (recall@3 {} vs {}); ranks beyond the candidate pool may differ",
            report::number(a.recall_at_3),
            report::number(b.recall_at_3)
        );
    }
}

fn print(report: &RetrievalReport) {
    let p = &report.production;
    println!(
        "deja eval retrieval: {} incidents, {} queries",
        report.incidents,
        report.headline.queries.len()
    );
    println!(
        "namespaces: {} (all fields), {} (symptoms only)",
        report.namespaces.all_fields, report.namespaces.symptoms_only
    );
    println!(
        "production settings: floor {:.2}, recency {}, limit {} (MRR over the top {})\n",
        p.similarity_floor,
        if p.recency_half_life_days > 0.0 {
            format!(
                "half-life {} days, weight {}",
                p.recency_half_life_days, p.recency_weight
            )
        } else {
            "off".to_owned()
        },
        p.default_limit,
        super::metrics::MRR_DEPTH
    );
    report::print_headline(&report.headline);
    println!("\nvariants (the same queries; floors applied to the same ranked lists):\n");
    print!("{}", variants::markdown(&report.variants));
}

/// Hits of a list, for tests of the variant logic.
#[cfg(test)]
pub(crate) fn hits(list: &[(&str, f64)]) -> Vec<search::Hit> {
    list.iter()
        .map(|(id, sim)| search::Hit {
            incident: (*id).to_owned(),
            similarity: Some(*sim),
            score: Some(*sim),
        })
        .collect()
}
