//! The bar of the worker's automatic recurrence links, and how it is chosen.
//!
//! A link `(new)-[:RECURRENCE_OF]->(old)` is written with no person looking, from an episode
//! (its cause, and what its conversation ruled out) standing for the query. It decides with
//! the search's own calibration (`search.recognition`: the same features, the same
//! contradiction rule) and a stricter `strong`: at the search's bar, a third of new incidents
//! would be linked to a look-alike (docs/EVALUATION.md, "Recurrence links").
//!
//! [`link_bar`] picks that bar on labelled episodes: each one stands for a new conversation
//! against the others of its org, once with its family in memory (a link to a family member is
//! right, to anything else wrong) and once with its family taken out (any link is a false
//! recurrence). `deja eval retrieval` calls it per cross-validation fold and once on
//! everything for the defaults it prints.

use super::calibrate::{halfway_down, highest_best_cut};
use super::{CalibrationQuery, FamilyOrder, Model, RecognitionParams};
use serde::{Deserialize, Serialize};

/// How much a wrong or false link costs against a right one: the search's `novel_weight`
/// (a false recognition misleads more than a missed one; a missed link is still found by
/// the next search).
pub const FALSE_LINK_WEIGHT: f64 = 1.5;

/// The confidence a link needs, per calibration of `search.recognition`
/// (`[search.recurrence]`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkBar {
    /// For a candidate the rerank stage scored.
    pub reranked: f64,
    /// For one decided by the similarity-only calibration.
    pub cosine_only: f64,
}

impl LinkBar {
    /// `recognition` with `strong` raised to the bar (never lowered: only what the search
    /// itself would call `strong` can be linked) and no family order (a link takes the single
    /// most confident match).
    pub fn over(&self, recognition: &RecognitionParams) -> RecognitionParams {
        let raise = |model: &Model, bar: f64| Model {
            strong: model.strong.max(bar),
            ..*model
        };
        RecognitionParams {
            reranked: raise(&recognition.reranked, self.reranked),
            cosine_only: raise(&recognition.cosine_only, self.cosine_only),
            family: FamilyOrder::OFF,
        }
    }
}

/// What linking did over labelled episodes at one bar.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LinkFigures {
    /// Episodes evaluated (each twice: with and without its family).
    pub episodes: usize,
    /// With its family in memory: linked to a family member.
    pub right: usize,
    /// With its family in memory: linked to another incident.
    pub wrong: usize,
    /// With its family taken out: linked to anything.
    pub false_links: usize,
}

impl LinkFigures {
    fn share(&self, count: usize) -> f64 {
        if self.episodes == 0 {
            0.0
        } else {
            count as f64 / self.episodes as f64
        }
    }

    pub fn right_share(&self) -> f64 {
        self.share(self.right)
    }

    pub fn wrong_share(&self) -> f64 {
        self.share(self.wrong)
    }

    pub fn false_share(&self) -> f64 {
        self.share(self.false_links)
    }
}

/// Pooled figures of two sets of episodes.
impl std::ops::Add for LinkFigures {
    type Output = LinkFigures;

    fn add(self, other: LinkFigures) -> LinkFigures {
        LinkFigures {
            episodes: self.episodes + other.episodes,
            right: self.right + other.right,
            wrong: self.wrong + other.wrong,
            false_links: self.false_links + other.false_links,
        }
    }
}

/// One episode's best link candidates under `model`: the most confident candidate that may be
/// labelled `strong` (not contradicted), whether it is of the family, and the most confident
/// one that is not of the family (what is linked once the family is taken out).
struct Best {
    confidence: f64,
    relevant: bool,
    without_family: f64,
}

fn best(query: &CalibrationQuery, model: &Model) -> Best {
    let mut best = Best {
        confidence: 0.0,
        relevant: false,
        without_family: 0.0,
    };
    for candidate in query.candidates.iter().filter(|c| !c.contradicted) {
        let confidence = model.confidence(&candidate.features);
        if confidence > best.confidence {
            best.confidence = confidence;
            best.relevant = candidate.relevant;
        }
        if !candidate.relevant {
            best.without_family = best.without_family.max(confidence);
        }
    }
    best
}

fn count(bests: &[Best], bar: f64) -> LinkFigures {
    let mut figures = LinkFigures {
        episodes: bests.len(),
        ..LinkFigures::default()
    };
    for b in bests {
        if b.confidence >= bar {
            if b.relevant {
                figures.right += 1;
            } else {
                figures.wrong += 1;
            }
        }
        if b.without_family >= bar {
            figures.false_links += 1;
        }
    }
    figures
}

/// Linking `episodes` with `model` at `bar` (a link needs `confidence >= bar`, as the
/// decision's `strong` does).
pub fn link_figures(episodes: &[CalibrationQuery], model: &Model, bar: f64) -> LinkFigures {
    let bests: Vec<Best> = episodes.iter().map(|q| best(q, model)).collect();
    count(&bests, bar)
}

/// The bar that maximises right − `false_link_weight` × (wrong + false) links over
/// `episodes`, never under the model's own `strong`; among equally good bars the highest
/// (the more conservative), placed halfway to the next lower confidence like `strong`
/// (`calibrate`). 1.0 when no bar links more right than it costs: nothing is linked.
pub fn link_bar(episodes: &[CalibrationQuery], model: &Model, false_link_weight: f64) -> f64 {
    let bests: Vec<Best> = episodes.iter().map(|q| best(q, model)).collect();
    let mut cuts: Vec<f64> = bests
        .iter()
        .flat_map(|b| [b.confidence, b.without_family])
        .filter(|c| *c >= model.strong)
        .collect();
    cuts.push(model.strong);
    cuts.push(1.0);
    cuts.sort_by(f64::total_cmp);
    cuts.dedup();
    let i = highest_best_cut(&cuts, |bar| {
        let f = count(&bests, bar);
        f.right as f64 - false_link_weight * (f.wrong + f.false_links) as f64
    });
    // The lowest cut is `strong` itself, and 1.0 links nothing: neither is moved.
    if i == 0 || cuts[i] >= 1.0 {
        return cuts[i];
    }
    halfway_down(&cuts, i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recognition::{CalibrationCandidate, Features, Thresholds};

    /// Confidence = σ(10 × cosine − 5): cosine 0.5 is confidence 0.5.
    fn model(strong: f64) -> Model {
        Model::from_weights(
            -5.0,
            [0.0, 10.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            Thresholds {
                strong,
                possible: 0.1,
            },
        )
    }

    fn cosine(x: f64) -> Features {
        [0.0, x, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    }

    fn episode(candidates: &[(f64, bool)]) -> CalibrationQuery {
        CalibrationQuery {
            candidates: candidates
                .iter()
                .map(|&(x, relevant)| CalibrationCandidate::new(cosine(x), relevant))
                .collect(),
            novel: false,
        }
    }

    /// Recurrences whose family member reads at cosine 0.9, look-alikes at 0.6–0.7.
    fn episodes() -> Vec<CalibrationQuery> {
        let mut all = Vec::new();
        for i in 0..6 {
            let d = f64::from(i) * 0.01;
            all.push(episode(&[(0.9 + d, true), (0.6 + d, false), (0.2, false)]));
        }
        // One whose look-alike outranks its family member.
        all.push(episode(&[(0.75, true), (0.8, false)]));
        all
    }

    #[test]
    fn the_bar_links_the_clear_recurrences_and_no_look_alike() {
        let m = model(0.5);
        let bar = link_bar(&episodes(), &m, FALSE_LINK_WEIGHT);
        let figures = link_figures(&episodes(), &m, bar);
        assert_eq!(figures.episodes, 7);
        assert_eq!(figures.right, 6, "bar {bar}");
        assert_eq!(figures.wrong, 0, "bar {bar}");
        assert_eq!(figures.false_links, 0, "bar {bar}");
        // Between the look-alikes' best (cosine 0.8) and the recurrences' lowest (0.9).
        assert!(bar > m.confidence(&cosine(0.8)) && bar < m.confidence(&cosine(0.9)));
    }

    #[test]
    fn at_the_search_bar_look_alikes_are_linked() {
        let m = model(0.5);
        let figures = link_figures(&episodes(), &m, m.strong);
        assert_eq!(figures.right, 6);
        assert_eq!(figures.wrong, 1);
        // Every episode's look-alike reads over 0.5 once its family is gone.
        assert_eq!(figures.false_links, 7);
        assert!((figures.false_share() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_contradicted_candidate_is_never_linked() {
        let m = model(0.5);
        let mut contradicted = episode(&[(0.95, true)]);
        contradicted.candidates[0].contradicted = true;
        let figures = link_figures(&[contradicted], &m, 0.6);
        assert_eq!(
            figures,
            LinkFigures {
                episodes: 1,
                ..LinkFigures::default()
            }
        );
    }

    #[test]
    fn nothing_is_linked_when_no_bar_pays_for_its_false_links() {
        // Every look-alike reads above every recurrence.
        let all: Vec<CalibrationQuery> = (0..4)
            .map(|_| episode(&[(0.7, true), (0.9, false)]))
            .collect();
        let m = model(0.5);
        assert_eq!(link_bar(&all, &m, FALSE_LINK_WEIGHT), 1.0);
        assert_eq!(link_figures(&all, &m, 1.0).right, 0);
    }

    #[test]
    fn what_an_episode_ruled_out_contradicts_a_past_cause_without_adding_words() {
        let mut episode = crate::testing::episode("conv-1");
        episode.issue_type = "tls-handshake-failure".into();
        episode.issue_description = "TLS handshakes to the acquirer fail".into();
        episode.summary = "x509 errors on every call".into();
        episode.root_cause = Some("a hostname missing from the certificate".into());
        episode.ruled_out = vec!["an expired certificate.".into(), " ".into()];
        let text = episode.cause_text();
        assert_eq!(
            text,
            "tls handshake failure. a hostname missing from the certificate"
        );
        let query = crate::recognition::QueryText::new(&text, &episode.components)
            .with_ruled_out(&episode.ruled_out);
        // The contradiction rule reads the ruled-out mechanism as denied: a past incident
        // whose root cause affirms it cannot be linked; the hypothesis adds no words.
        let mut expired = crate::testing::episode("inc-1");
        expired.root_cause = Some("the client certificate had expired at midnight".into());
        let mut evidence = crate::recognition::Evidence::default();
        query.annotate(&expired, &mut evidence);
        assert_eq!(
            evidence.contradicted,
            vec!["certificate".to_owned(), "expired".to_owned()],
            "{text}"
        );
        assert!(!query.terms().contains("expired"));
        // Ruled out as a whole: a cause that names a certificate but not its expiry stands.
        let mut unrelated = crate::testing::episode("inc-2");
        unrelated.root_cause = Some("a hostname missing from the certificate".into());
        let mut evidence = crate::recognition::Evidence::default();
        query.annotate(&unrelated, &mut evidence);
        assert!(evidence.contradicted.is_empty());
    }

    #[test]
    fn the_bar_is_never_under_the_search_strong() {
        let m = model(0.99);
        let bar = link_bar(&episodes(), &m, FALSE_LINK_WEIGHT);
        assert!(bar >= 0.99, "{bar}");
        let params = RecognitionParams {
            reranked: m,
            cosine_only: m,
            family: FamilyOrder {
                weight: 10.0,
                floor: 0.03,
            },
        };
        let raised = LinkBar {
            reranked: 0.7,
            cosine_only: 0.999,
        }
        .over(&params);
        assert_eq!(raised.reranked.strong, 0.99, "never lowered");
        assert_eq!(raised.cosine_only.strong, 0.999);
        assert_eq!(raised.reranked.possible, m.possible);
        assert!(!raised.family.is_on());
    }
}
