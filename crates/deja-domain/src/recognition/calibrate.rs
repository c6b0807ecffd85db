//! Fitting the recognition model on labelled queries: a ridge-regularised logistic
//! regression (Newton's method on standardized features, so the weights are comparable and
//! the fit is deterministic), then the two thresholds.
//!
//! Every feature is evidence *for* a recurrence (a closer text, a shared component, a shared
//! error string), so no weight may be negative: a feature that fits a negative weight is
//! dropped and the rest refitted. A negative weight only learns how a labelled corpus was
//! written — the dev corpus puts siblings on different services and look-alikes on the same
//! ones on purpose, which makes "names the same component" fit at −9.8 — and would make
//! deja ignore exactly the recurrences agents ask about ("redis evictions again").
//!
//! - `strong` maximises (siblings with a family member at or above it) −
//!   `novel_weight` (1.5: a false recognition costs more than a missed one, which still
//!   shows as `possible`) × (novel queries with anything at or above it), placed halfway to the
//!   next lower confidence so that a held-out query just below the best cut is not lost.
//! - `possible` is the highest threshold that leaves at most `max_sibling_empty` of the
//!   sibling queries with nothing at all, again halfway to the next lower value. A
//!   contradicted candidate never opens an answer on its own (`decide`), so each query's best
//!   is taken over the candidates that are not contradicted.
//!
//! `deja eval retrieval` calls [`fit`] per cross-validation fold (training families only)
//! and once on everything for the defaults it prints.

use super::{Features, Model, FEATURES, FEATURE_COUNT};

/// The candidates of one labelled query.
#[derive(Debug, Clone, PartialEq)]
pub struct CalibrationQuery {
    pub candidates: Vec<CalibrationCandidate>,
    /// A failure mode that is not in memory: every candidate is wrong.
    pub novel: bool,
}

/// One labelled candidate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CalibrationCandidate {
    pub features: Features,
    /// Of the query's root-cause family.
    pub relevant: bool,
    /// The query denies what its root cause affirms ([`super::Evidence::contradicted`]): the
    /// decision never labels it `strong`, so the `strong` threshold is chosen without it
    /// (it still counts for the weights and for `possible`).
    pub contradicted: bool,
}

impl CalibrationCandidate {
    pub fn new(features: Features, relevant: bool) -> Self {
        CalibrationCandidate {
            features,
            relevant,
            contradicted: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FitOptions {
    /// Which features the model may use, in [`FEATURES`] order (off = weight 0).
    pub features: [bool; FEATURE_COUNT],
    /// Ridge penalty on the standardized weights (not on the bias).
    pub l2: f64,
    /// How much a novel query answered `strong` costs against a sibling answered `strong`.
    pub novel_weight: f64,
    /// The share of sibling queries `possible` may leave with nothing.
    pub max_sibling_empty: f64,
}

impl Default for FitOptions {
    /// Every feature but `fused`: a rank is relative to the other candidates of the query,
    /// not a property of the (query, episode) pair, so with it the second of two equally good
    /// recurrences would always be the less confident one (and strategies, which need two
    /// strong matches, would rarely qualify); cross-validated, leaving it out also ranks
    /// better. `root_cause` (the mechanism words the query names) is in since the
    /// contradiction rule keeps the look-alikes that reuse a past incident's mechanism words
    /// but deny them out of `strong` (docs/EVALUATION.md, "The query's denials").
    fn default() -> Self {
        FitOptions {
            features: [true, true, false, true, true, true, true, true],
            l2: 1.0,
            novel_weight: 1.5,
            max_sibling_empty: 0.03,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    pub strong: f64,
    pub possible: f64,
}

/// Fits the weights, then the thresholds, on `queries`.
pub fn fit(queries: &[CalibrationQuery], options: &FitOptions) -> Model {
    let samples: Vec<(&Features, bool)> = queries
        .iter()
        .flat_map(|q| q.candidates.iter().map(|c| (&c.features, c.relevant)))
        .collect();
    let mut options = *options;
    let (bias, weights) = loop {
        let (bias, weights, standardized) = logistic(&samples, &options);
        // The most negative first (on the standardized scale: a logit and a cosine spread
        // over ranges orders of magnitude apart): with it gone, a feature it pulled below
        // zero through their correlation may fit positive again and stay.
        let most_negative = standardized
            .iter()
            .enumerate()
            .filter(|(j, _)| weights[*j] < 0.0)
            .min_by(|(_, a), (_, b)| a.total_cmp(b))
            .map(|(j, _)| j);
        match most_negative {
            Some(negative) => options.features[negative] = false,
            None => break (bias, weights),
        }
    };
    let options = &options;
    let unthresholded = Model::from_weights(
        bias,
        weights,
        Thresholds {
            strong: 1.0,
            possible: 0.0,
        },
    );
    let thresholds = thresholds(queries, &unthresholded, options);
    Model::from_weights(bias, weights, thresholds)
}

/// Ridge logistic regression by Newton's method on standardized, enabled features.
/// The bias and weights on the raw feature scale, and the weights on the standardized one
/// (what compares features with each other).
fn logistic(samples: &[(&Features, bool)], options: &FitOptions) -> (f64, Features, Features) {
    let enabled: Vec<usize> = (0..FEATURES.len())
        .filter(|&j| options.features[j])
        .collect();
    let n = samples.len().max(1) as f64;
    let mut mean = vec![0.0; enabled.len()];
    let mut scale = vec![1.0; enabled.len()];
    for (k, &j) in enabled.iter().enumerate() {
        mean[k] = samples.iter().map(|(x, _)| x[j]).sum::<f64>() / n;
        let var = samples
            .iter()
            .map(|(x, _)| (x[j] - mean[k]).powi(2))
            .sum::<f64>()
            / n;
        // A constant feature carries nothing: leave it unscaled, its weight goes to ~0.
        scale[k] = if var > 1e-12 { var.sqrt() } else { 1.0 };
    }
    let rows: Vec<(Vec<f64>, f64)> = samples
        .iter()
        .map(|(x, y)| {
            let mut row = Vec::with_capacity(enabled.len() + 1);
            row.push(1.0);
            row.extend(
                enabled
                    .iter()
                    .enumerate()
                    .map(|(k, &j)| (x[j] - mean[k]) / scale[k]),
            );
            (row, if *y { 1.0 } else { 0.0 })
        })
        .collect();
    let p = enabled.len() + 1;
    let mut beta = vec![0.0; p];
    for _ in 0..50 {
        let mut gradient = vec![0.0; p];
        let mut hessian = vec![vec![0.0; p]; p];
        for (row, y) in &rows {
            let z: f64 = row.iter().zip(&beta).map(|(a, b)| a * b).sum();
            let prob = super::sigmoid(z);
            let w = (prob * (1.0 - prob)).max(1e-9);
            for a in 0..p {
                gradient[a] += (y - prob) * row[a];
                for b in 0..p {
                    hessian[a][b] += w * row[a] * row[b];
                }
            }
        }
        for a in 1..p {
            gradient[a] -= options.l2 * beta[a];
            hessian[a][a] += options.l2;
        }
        let Some(step) = solve(hessian, gradient) else {
            break;
        };
        let size: f64 = step.iter().map(|s| s.abs()).sum();
        for (b, s) in beta.iter_mut().zip(&step) {
            *b += s;
        }
        if size < 1e-10 {
            break;
        }
    }
    // Back to the raw feature scale.
    let mut weights = [0.0; FEATURE_COUNT];
    let mut standardized = [0.0; FEATURE_COUNT];
    let mut bias = beta[0];
    for (k, &j) in enabled.iter().enumerate() {
        standardized[j] = beta[k + 1];
        weights[j] = beta[k + 1] / scale[k];
        bias -= weights[j] * mean[k];
    }
    (bias, weights, standardized)
}

/// Gaussian elimination with partial pivoting; `None` for a singular system.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let (upper, lower) = a.split_at_mut(col + 1);
        let pivot_row = &upper[col];
        for (offset, row) in lower.iter_mut().enumerate() {
            let factor = row[col] / pivot_row[col];
            for (cell, above) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                *cell -= factor * above;
            }
            b[col + 1 + offset] -= factor * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let sum: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - sum) / a[row][row];
    }
    Some(x)
}

fn thresholds(queries: &[CalibrationQuery], model: &Model, options: &FitOptions) -> Thresholds {
    // Per query: the best confidence of a family member (siblings) and of anything that
    // may be labelled strong or open an answer (not contradicted).
    let scored: Vec<(bool, f64, f64)> = queries
        .iter()
        .map(|q| {
            let mut best_relevant = 0.0f64;
            let mut best_any = 0.0f64;
            for candidate in &q.candidates {
                let c = model.confidence(&candidate.features);
                if candidate.contradicted {
                    continue;
                }
                best_any = best_any.max(c);
                if candidate.relevant {
                    best_relevant = best_relevant.max(c);
                }
            }
            (q.novel, best_relevant, best_any)
        })
        .collect();
    let siblings = scored.iter().filter(|(novel, ..)| !novel).count().max(1) as f64;
    let novels = scored.iter().filter(|(novel, ..)| *novel).count();

    let mut cuts: Vec<f64> = scored
        .iter()
        .flat_map(|(novel, relevant, any)| {
            if *novel {
                vec![*any]
            } else {
                vec![*relevant, *any]
            }
        })
        .collect();
    cuts.push(1.0);
    cuts.sort_by(f64::total_cmp);
    cuts.dedup();
    let objective = |t: f64| {
        let sibling_strong = scored
            .iter()
            .filter(|(novel, relevant, ..)| !novel && *relevant >= t)
            .count() as f64
            / siblings;
        let novel_strong = if novels == 0 {
            0.0
        } else {
            scored
                .iter()
                .filter(|(novel, _, any)| *novel && *any >= t)
                .count() as f64
                / novels as f64
        };
        sibling_strong - options.novel_weight * novel_strong
    };
    // The last cut, 1.0, is "nothing is strong" (a confidence is below 1): when that is
    // best, the threshold is 1.0 itself, not halfway down to the highest confidence seen,
    // which a new query could pass.
    let best = highest_best_cut(&cuts, objective);
    let strong = if cuts[best] >= 1.0 {
        1.0
    } else {
        halfway_down(&cuts, best)
    };

    let mut sibling_best: Vec<f64> = scored
        .iter()
        .filter(|(novel, ..)| !novel)
        .map(|(_, _, any)| *any)
        .collect();
    sibling_best.sort_by(f64::total_cmp);
    let possible = if sibling_best.is_empty() {
        0.0
    } else {
        let allowed = (options.max_sibling_empty * sibling_best.len() as f64).floor() as usize;
        halfway_down(&sibling_best, allowed.min(sibling_best.len() - 1))
    };
    Thresholds {
        strong,
        possible: possible.min(strong),
    }
}

/// The index of the highest of the `cuts` (sorted ascending) where `objective` is at its
/// best: among equally good thresholds, the more conservative one.
pub(super) fn highest_best_cut(cuts: &[f64], objective: impl Fn(f64) -> f64) -> usize {
    let mut best = (f64::NEG_INFINITY, 0usize);
    for (i, &t) in cuts.iter().enumerate() {
        let value = objective(t);
        if value >= best.0 - 1e-12 {
            best = (value, i);
        }
    }
    best.1
}

/// Halfway between `sorted[i]` and the value below it (0 below the first).
pub(super) fn halfway_down(sorted: &[f64], i: usize) -> f64 {
    let below = if i == 0 { 0.0 } else { sorted[i - 1] };
    (sorted[i] + below) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(features: Features, relevant: bool) -> CalibrationCandidate {
        CalibrationCandidate::new(features, relevant)
    }

    /// Sibling queries whose family members have high cosine and rerank, novel queries
    /// whose best candidates are middling: a separable toy corpus.
    fn corpus() -> Vec<CalibrationQuery> {
        let mut queries = Vec::new();
        for i in 0..12 {
            let d = i as f64 * 0.01;
            queries.push(CalibrationQuery {
                candidates: vec![
                    candidate(
                        [4.0 + d * 10.0, 0.7 + d, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                        true,
                    ),
                    candidate([-3.0, 0.45 + d, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0], false),
                    candidate([-6.0, 0.3, 0.3, 0.0, 0.0, 0.0, 0.0, 0.0], false),
                ],
                novel: false,
            });
        }
        for i in 0..6 {
            let d = i as f64 * 0.01;
            queries.push(CalibrationQuery {
                candidates: vec![
                    candidate(
                        [-1.0 - d * 10.0, 0.55 + d, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                        false,
                    ),
                    candidate([-5.0, 0.4, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0], false),
                ],
                novel: true,
            });
        }
        queries
    }

    #[test]
    fn a_separable_corpus_gets_strong_siblings_and_no_strong_novel_queries() {
        let model = fit(&corpus(), &FitOptions::default());
        for q in corpus() {
            let best = q
                .candidates
                .iter()
                .map(|c| model.confidence(&c.features))
                .fold(0.0, f64::max);
            if q.novel {
                assert!(best < model.strong, "novel at {best} vs {}", model.strong);
            } else {
                assert!(
                    best >= model.strong,
                    "sibling at {best} vs {}",
                    model.strong
                );
            }
        }
        assert!(model.rerank > 0.0 && model.possible <= model.strong);
    }

    #[test]
    fn a_feature_that_would_fit_a_negative_weight_is_dropped() {
        // The `component` feature is set only on wrong candidates: it would fit negative.
        let mut queries = corpus();
        for q in &mut queries {
            for c in &mut q.candidates {
                c.features[3] = if c.relevant { 0.0 } else { 1.0 };
            }
        }
        let model = fit(&queries, &FitOptions::default());
        assert_eq!(model.component, 0.0);
        assert!(model.weights().iter().all(|w| *w >= 0.0), "{model:?}");
        assert!(model.cosine > 0.0);
    }

    /// Two features fit negative together, one only through the other: `issue_type` marks
    /// only wrong candidates, `component` is higher for the wrong candidates without that
    /// mark than for the right ones, but lower over all wrong ones. Dropping the most negative
    /// (`issue_type`) lets `component` fit positive and stay; dropping the first negative
    /// would have lost both.
    #[test]
    fn the_most_negative_weight_is_dropped_first() {
        let with = |component: f64, issue_type: f64, relevant: bool| {
            candidate(
                [0.0, 0.0, 0.0, component, issue_type, 0.0, 0.0, 0.0],
                relevant,
            )
        };
        let queries: Vec<CalibrationQuery> = (0..10)
            .map(|_| CalibrationQuery {
                candidates: vec![
                    with(1.0, 0.0, true),
                    with(1.2, 0.0, false),
                    with(0.0, 1.0, false),
                    with(0.0, 1.0, false),
                ],
                novel: false,
            })
            .collect();
        let model = fit(&queries, &FitOptions::default());
        assert_eq!(model.issue_type, 0.0, "{model:?}");
        assert!(model.component > 0.0, "{model:?}");
    }

    /// When every novel query scores above every recurrence, nothing may be strong: the
    /// threshold is 1.0 (no confidence reaches it), not halfway to the highest seen.
    #[test]
    fn when_nothing_strong_is_best_nothing_can_be_strong() {
        let with_rerank =
            |x: f64, relevant: bool| candidate([x, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], relevant);
        let queries = vec![
            CalibrationQuery {
                candidates: vec![with_rerank(1.0, true)],
                novel: false,
            },
            CalibrationQuery {
                candidates: vec![with_rerank(3.0, false)],
                novel: true,
            },
        ];
        let model = Model::from_weights(
            0.0,
            [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            Thresholds {
                strong: 1.0,
                possible: 0.0,
            },
        );
        let fitted = thresholds(&queries, &model, &FitOptions::default());
        assert_eq!(fitted.strong, 1.0);
        assert!(model.confidence(&[5.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]) < fitted.strong);
    }

    #[test]
    fn a_disabled_feature_gets_no_weight() {
        let options = FitOptions {
            features: [false, true, true, true, true, true, true, true],
            ..FitOptions::default()
        };
        let model = fit(&corpus(), &options);
        assert_eq!(model.rerank, 0.0);
        assert!(model.cosine > 0.0);
    }

    #[test]
    fn possible_leaves_no_sibling_empty_when_none_may_be() {
        let options = FitOptions {
            max_sibling_empty: 0.0,
            ..FitOptions::default()
        };
        let model = fit(&corpus(), &options);
        for q in corpus().iter().filter(|q| !q.novel) {
            assert!(q
                .candidates
                .iter()
                .any(|c| model.confidence(&c.features) >= model.possible));
        }
    }

    #[test]
    fn contradicted_candidates_do_not_set_the_strong_threshold() {
        // Novel queries whose best candidates look like recurrences, but the query denies
        // their cause: only the contradiction tells them apart.
        let mut queries = corpus();
        for i in 0..6 {
            let d = i as f64 * 0.01;
            let mut look_alike = candidate(
                [4.0 + d * 10.0, 0.7 + d, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                false,
            );
            look_alike.contradicted = true;
            queries.push(CalibrationQuery {
                candidates: vec![look_alike],
                novel: true,
            });
        }
        let model = fit(&queries, &FitOptions::default());
        let recognized = queries
            .iter()
            .filter(|q| !q.novel)
            .filter(|q| {
                q.candidates
                    .iter()
                    .any(|c| c.relevant && model.confidence(&c.features) >= model.strong)
            })
            .count();
        assert_eq!(recognized, 12, "{model:?}");
        let mut blind = queries.clone();
        for q in &mut blind {
            for c in &mut q.candidates {
                c.contradicted = false;
            }
        }
        let without = fit(&blind, &FitOptions::default());
        assert!(without.strong > model.strong, "{without:?} vs {model:?}");
    }

    #[test]
    fn the_solver_solves_a_small_system() {
        let x = solve(vec![vec![2.0, 1.0], vec![1.0, 3.0]], vec![3.0, 5.0]).unwrap();
        assert!((x[0] - 0.8).abs() < 1e-12 && (x[1] - 1.4).abs() < 1e-12);
        assert!(solve(vec![vec![1.0, 2.0], vec![2.0, 4.0]], vec![1.0, 2.0]).is_none());
    }
}
