//! The variants' figures as people read them: markdown tables, the calibration as TOML for
//! `defaults.toml`, and the candidates dumped for offline analysis.

use super::{QueryCandidates, RepeatedRow, VariantRow};
use crate::report::number;
use deja_domain::recognition::{features, RecognitionParams};

/// The repeated rows as a markdown table (mean ± sd over the repeats).
pub fn repeated_markdown(rows: &[RepeatedRow]) -> String {
    let mut out = String::from(
        "| variant | R@1 | R@3 | MRR | sibling empty | sibling strong | novel any | novel strong |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let (m, d) = (&r.mean, &r.sd);
        let cell = |mean: Option<f64>, sd: Option<f64>| format!("{}±{}", number(mean), number(sd));
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.name,
            cell(m.recall_at_1, d.recall_at_1),
            cell(m.recall_at_3, d.recall_at_3),
            cell(m.mrr, d.mrr),
            cell(m.sibling_empty, d.sibling_empty),
            cell(m.sibling_strong, d.sibling_strong),
            cell(m.novel_false_positive, d.novel_false_positive),
            cell(m.novel_strong, d.novel_strong),
        ));
    }
    out
}

/// The variants as a markdown table: pooled figures, then the fold mean ± sd of the
/// recognition metrics for the cross-validated rows.
pub fn markdown(rows: &[VariantRow]) -> String {
    let mut out = String::from(
        "| variant | R@1 | R@3 | MRR | sibling empty | sibling strong | novel any | novel strong | ms p50 / p95 |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let s = &r.summary;
        let cell = |pooled: Option<f64>, mean: Option<f64>, sd: Option<f64>| {
            if r.cross_validated {
                format!("{} ({}±{})", number(pooled), number(mean), number(sd))
            } else {
                number(pooled)
            }
        };
        let (m, d) = (&r.fold_mean, &r.fold_sd);
        out.push_str(&format!(
            "| {}{} | {} | {} | {} | {} | {} | {} | {} | {:.0} / {:.0} |\n",
            r.name,
            if r.cross_validated { " ᶜᵛ" } else { "" },
            cell(s.recall_at_1, m.recall_at_1, d.recall_at_1),
            cell(s.recall_at_3, m.recall_at_3, d.recall_at_3),
            cell(s.mrr, m.mrr, d.mrr),
            cell(s.sibling_empty, m.sibling_empty, d.sibling_empty),
            cell(s.sibling_strong, m.sibling_strong, d.sibling_strong),
            cell(
                s.novel_false_positive,
                m.novel_false_positive,
                d.novel_false_positive
            ),
            cell(s.novel_strong, m.novel_strong, d.novel_strong),
            r.latency_p50_ms,
            r.latency_p95_ms,
        ));
    }
    out
}

/// One JSON line per query and memory: its id, memory, fold, label kind and every candidate's incident,
/// relevance label, evidence and features (`deja eval retrieval --dump-candidates`).
pub fn dump(
    path: &std::path::Path,
    candidates: &[QueryCandidates],
) -> Result<(), crate::EvalError> {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for qc in candidates {
        let line = serde_json::json!({
            "id": qc.id,
            "memory": qc.memory,
            "fold": qc.fold,
            "novel": qc.novel(),
            "timings": qc.set.timings,
            "candidates": qc.set.candidates.iter().zip(&qc.incidents).map(|(c, incident)| {
                serde_json::json!({
                    "incident": incident,
                    "relevant": qc.relevant.contains(incident),
                    "evidence": c.evidence,
                    "features": features(&c.evidence),
                    // Not part of the evidence's own serialization (no answer shows it).
                    "cause_vector": c.evidence.cause_vector,
                })
            }).collect::<Vec<_>>(),
        });
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}

/// The calibration as the TOML to put in `crates/deja-config/src/defaults.toml`.
pub fn calibration_toml(params: &RecognitionParams) -> String {
    let mut out = String::new();
    for (name, m) in [
        ("reranked", &params.reranked),
        ("cosine_only", &params.cosine_only),
    ] {
        out.push_str(&format!(
            "[search.recognition.{name}]\nbias = {:.4}\nrerank = {:.4}\ncosine = {:.4}\n\
             fused = {:.4}\ncomponent = {:.4}\nissue_type = {:.4}\nliteral = {:.4}\n\
             root_cause = {:.4}\nlate = {:.4}\n\
             strong = {:.4}\npossible = {:.4}\n\n",
            m.bias,
            m.rerank,
            m.cosine,
            m.fused,
            m.component,
            m.issue_type,
            m.literal,
            m.root_cause,
            m.late,
            m.strong,
            m.possible
        ));
    }
    out
}
