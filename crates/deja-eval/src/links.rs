//! Recurrence links, measured: every labelled incident stands for a new conversation's
//! episode and is recognized the way the worker links one (`RecurrenceLinker`'s candidates,
//! the search's calibration, the bar of `[search.recurrence]`), once with its family in
//! memory and once with its family taken out (`deja_domain::recognition::links`).
//!
//! The incidents are recognized against their whole org, not only their team: the corpus
//! spreads each family over teams on purpose, and a link decides the same way in any scope.
//! Their dates are not the order of a recurrence, so a link may point at any family member
//! here (the worker only links to an older one).

use crate::variants::{self, QueryCandidates, RerankStage};
use deja_domain::recognition::{
    link_bar, link_figures, CalibrationQuery, LinkBar, LinkFigures, RecognitionParams,
    FALSE_LINK_WEIGHT,
};
use serde::Serialize;
use std::collections::HashMap;

/// A way of deciding links and what it did: the shares of episodes linked to a family member
/// (`right`), to another incident (`wrong`), and linked to anything once their family is taken
/// out (`false`), as mean ± sd over the splits.
#[derive(Debug, Clone, Serialize)]
pub struct LinkRow {
    pub name: String,
    pub cross_validated: bool,
    pub right: f64,
    pub right_sd: f64,
    pub wrong: f64,
    pub wrong_sd: f64,
    pub false_link: f64,
    pub false_link_sd: f64,
}

/// The links part of `deja eval retrieval`.
#[derive(Debug, Clone, Serialize)]
pub struct LinkReport {
    /// Incidents that stood for a new episode.
    pub episodes: usize,
    /// Splits of the families over the folds the cross-validated rows average over.
    pub splits: usize,
    pub rows: Vec<LinkRow>,
    /// The bars fitted on every query and every incident: what `defaults.toml` should hold.
    pub bar: LinkBar,
}

/// The configured links, then links cross-validated over `splits` (each a fold per search
/// query): per fold, the search's calibration fitted on the other folds' queries and the bar
/// on the other folds' incidents, scored on the held-out incidents; and the bars over
/// `fitted`, the calibration fitted on every query. `links[i]` holds the candidates of
/// incident `incidents[i]`, its family's other members as `relevant`. Links are read with
/// the rerank stage the queries' calibrations are fitted with.
pub fn evaluate(
    queries: &[QueryCandidates],
    links: &[QueryCandidates],
    incidents: &[String],
    splits: &[Vec<usize>],
    configured: (&RecognitionParams, &LinkBar),
    fitted_on_everything: &RecognitionParams,
) -> LinkReport {
    let stage = variants::rerank_stage(queries);
    let labelled = Labelled {
        reranked: calibration(links, stage),
        cosine_only: calibration(links, RerankStage::NONE),
    };
    let (recognition, bar) = configured;
    let configured_params = bar.over(recognition);
    let model = configured_params.model(stage.any());
    let mut rows = vec![fixed_row(
        "configured ([search.recurrence] over [search.recognition])",
        &[link_figures(&labelled.reranked, model, model.strong)],
    )];

    let mut search_bar = Vec::new();
    let mut fitted_bar = Vec::new();
    let mut degraded = Vec::new();
    for folds in splits {
        let split = held_out(queries, &labelled, incidents, folds, stage);
        search_bar.push(split.search_bar);
        fitted_bar.push(split.fitted_bar);
        degraded.push(split.degraded);
    }
    rows.push(cv_row(
        "the search's own `strong` (no link bar) ᶜᵛ",
        &search_bar,
    ));
    rows.push(cv_row("link bar fitted per fold ᶜᵛ", &fitted_bar));
    rows.push(cv_row(
        "link bar fitted per fold, without the rerank stage (degraded) ᶜᵛ",
        &degraded,
    ));

    LinkReport {
        episodes: links.len(),
        splits: splits.len(),
        rows,
        bar: fitted(fitted_on_everything, &labelled, stage),
    }
}

/// The labelled links as each calibration reads them.
struct Labelled {
    /// With the rerank stage's scores.
    reranked: Vec<CalibrationQuery>,
    /// Without them (a degraded search).
    cosine_only: Vec<CalibrationQuery>,
}

impl Labelled {
    fn subset(&self, keep: impl Fn(usize) -> bool) -> Labelled {
        let pick = |all: &[CalibrationQuery]| {
            all.iter()
                .enumerate()
                .filter(|(i, _)| keep(*i))
                .map(|(_, q)| q.clone())
                .collect()
        };
        Labelled {
            reranked: pick(&self.reranked),
            cosine_only: pick(&self.cosine_only),
        }
    }
}

/// The bars fitted on `links` over `params`.
fn fitted(params: &RecognitionParams, links: &Labelled, stage: RerankStage) -> LinkBar {
    LinkBar {
        reranked: link_bar(
            &links.reranked,
            params.model(stage.any()),
            FALSE_LINK_WEIGHT,
        ),
        cosine_only: link_bar(&links.cosine_only, &params.cosine_only, FALSE_LINK_WEIGHT),
    }
}

fn calibration(links: &[QueryCandidates], stage: RerankStage) -> Vec<CalibrationQuery> {
    links.iter().map(|l| l.calibration(stage, true)).collect()
}

struct Split {
    search_bar: LinkFigures,
    fitted_bar: LinkFigures,
    degraded: LinkFigures,
}

/// One split's held-out links, pooled over its folds. An incident's fold is its family's
/// (the fold of the search queries that name it); incidents no query names are left out.
fn held_out(
    queries: &[QueryCandidates],
    links: &Labelled,
    incidents: &[String],
    folds: &[usize],
    stage: RerankStage,
) -> Split {
    let fold_of: HashMap<&str, usize> = queries
        .iter()
        .zip(folds)
        .flat_map(|(q, &fold)| q.relevant.iter().map(move |id| (id.as_str(), fold)))
        .collect();
    let link_fold: Vec<Option<usize>> = incidents
        .iter()
        .map(|id| fold_of.get(id.as_str()).copied())
        .collect();
    let mut split = Split {
        search_bar: LinkFigures::default(),
        fitted_bar: LinkFigures::default(),
        degraded: LinkFigures::default(),
    };
    let fold_count = folds.iter().max().map_or(0, |m| m + 1);
    for fold in 0..fold_count {
        let test = links.subset(|i| link_fold[i] == Some(fold));
        if test.reranked.is_empty() {
            continue;
        }
        let train_links = links.subset(|i| link_fold[i].is_some_and(|f| f != fold));
        let train: Vec<&QueryCandidates> = queries
            .iter()
            .zip(folds)
            .filter(|(_, &f)| f != fold)
            .map(|(q, _)| q)
            .collect();
        let params = variants::calibrate(&train, stage);
        let linked = fitted(&params, &train_links, stage).over(&params);
        let model = params.model(stage.any());
        split.search_bar = split.search_bar + link_figures(&test.reranked, model, model.strong);
        let model = linked.model(stage.any());
        split.fitted_bar = split.fitted_bar + link_figures(&test.reranked, model, model.strong);
        let model = &linked.cosine_only;
        split.degraded = split.degraded + link_figures(&test.cosine_only, model, model.strong);
    }
    split
}

fn fixed_row(name: &str, figures: &[LinkFigures]) -> LinkRow {
    LinkRow {
        cross_validated: false,
        ..cv_row(name, figures)
    }
}

fn cv_row(name: &str, splits: &[LinkFigures]) -> LinkRow {
    let stat = |share: fn(&LinkFigures) -> f64| {
        let values: Vec<f64> = splits.iter().map(share).collect();
        let n = values.len().max(1) as f64;
        let mean = values.iter().sum::<f64>() / n;
        let sd = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
        (mean, sd)
    };
    let (right, right_sd) = stat(LinkFigures::right_share);
    let (wrong, wrong_sd) = stat(LinkFigures::wrong_share);
    let (false_link, false_link_sd) = stat(LinkFigures::false_share);
    LinkRow {
        name: name.to_owned(),
        cross_validated: true,
        right,
        right_sd,
        wrong,
        wrong_sd,
        false_link,
        false_link_sd,
    }
}

/// The rows as a markdown table.
pub fn markdown(rows: &[LinkRow]) -> String {
    let mut out = String::from(
        "| links decided by | linked right | linked wrong | false link (family taken out) |\n\
         |---|---|---|---|\n",
    );
    for r in rows {
        let cell = |mean: f64, sd: f64| {
            if r.cross_validated {
                format!("{mean:.2}±{sd:.2}")
            } else {
                format!("{mean:.2}")
            }
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.name,
            cell(r.right, r.right_sd),
            cell(r.wrong, r.wrong_sd),
            cell(r.false_link, r.false_link_sd),
        ));
    }
    out
}

/// `[search.recurrence]` as `defaults.toml` writes it.
pub fn bar_toml(bar: &LinkBar) -> String {
    format!(
        "[search.recurrence]\nreranked = {:.4}\ncosine_only = {:.4}\n",
        bar.reranked, bar.cosine_only
    )
}
