//! The labelled corpus (format: the eval README, `tests/fixtures/eval/`): incidents, queries
//! and transcripts, loaded and cross-checked before anything is written.
//!
//! Incidents go through the import command's own parser, so a record the eval accepts is a
//! record `deja import` accepts. The `cluster` label is read separately, from the raw JSON,
//! for reporting only: it never reaches an episode.

use crate::EvalError;
use deja_domain::import::{parse_records, IncidentRecord};
use serde::Deserialize;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Family label of a query whose relevant list is empty.
pub const NOVEL: &str = "novel";

#[derive(Debug, Clone, Deserialize)]
pub struct EvalQuery {
    pub id: String,
    /// `None` = org-wide search.
    #[serde(default)]
    pub team: Option<String>,
    pub query: String,
    #[serde(default)]
    pub relevant: Vec<String>,
}

pub struct Incidents {
    /// Valid records in file order, with their line numbers.
    pub records: Vec<(usize, IncidentRecord)>,
    /// Incident id → family (`cluster`), for reporting.
    families: HashMap<String, String>,
}

impl Incidents {
    /// Parses `path`; any invalid record is an error, because queries may point at it.
    pub fn load(path: &Path) -> Result<Incidents, EvalError> {
        let text = read(path)?;
        let (records, invalid) = parse_records(&text, None);
        if let Some((line, error)) = invalid.first() {
            return Err(EvalError::Input(format!(
                "{}:{line}: {error} ({} invalid records in all)",
                path.display(),
                invalid.len()
            )));
        }
        if records.is_empty() {
            return Err(EvalError::Input(format!(
                "{} holds no incident",
                path.display()
            )));
        }
        let mut seen = BTreeSet::new();
        for (line, record) in &records {
            if !seen.insert(record.id.as_str()) {
                return Err(EvalError::Input(format!(
                    "{}:{line}: duplicate id {}",
                    path.display(),
                    record.id
                )));
            }
        }
        Ok(Incidents {
            families: families(&text),
            records,
        })
    }

    /// Parses every file of `paths`, in order, as one corpus: a held-out fold searched
    /// beside the dev memory (`tests/fixtures/eval/holdout/`). An id in two files is an
    /// error, as within one.
    pub fn load_all(paths: &[PathBuf]) -> Result<Incidents, EvalError> {
        let mut all = Incidents {
            records: Vec::new(),
            families: HashMap::new(),
        };
        for path in paths {
            let incidents = Incidents::load(path)?;
            for (line, record) in incidents.records {
                if all.get(&record.id).is_some() {
                    return Err(EvalError::Input(format!(
                        "{}:{line}: duplicate id {} (also in an earlier file)",
                        path.display(),
                        record.id
                    )));
                }
                all.records.push((line, record));
            }
            all.families.extend(incidents.families);
        }
        if all.records.is_empty() {
            return Err(EvalError::Input("no incidents file given".to_owned()));
        }
        Ok(all)
    }

    pub fn get(&self, id: &str) -> Option<&IncidentRecord> {
        self.records.iter().map(|(_, r)| r).find(|r| r.id == id)
    }

    pub fn family(&self, id: &str) -> &str {
        self.families.get(id).map_or("unlabelled", String::as_str)
    }

    /// The family of a query: the family of its relevant incidents (joined with `+` if they
    /// disagree), or `novel`.
    pub fn query_family(&self, relevant: &[String]) -> String {
        if relevant.is_empty() {
            return NOVEL.to_owned();
        }
        let names: BTreeSet<&str> = relevant.iter().map(|id| self.family(id)).collect();
        names.into_iter().collect::<Vec<_>>().join("+")
    }
}

/// `id` → `cluster` of every line that has both; other lines are ignored here (the record
/// parser reports them).
fn families(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|value| {
            let id = value.get("id")?.as_str()?.to_owned();
            let cluster = value.get("cluster")?.as_str()?.to_owned();
            Some((id, cluster))
        })
        .collect()
}

/// Queries from `path`; every relevant id must be an incident of `incidents`.
pub fn load_queries(path: &Path, incidents: &Incidents) -> Result<Vec<EvalQuery>, EvalError> {
    let text = read(path)?;
    let mut queries = Vec::new();
    let mut seen = BTreeSet::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut query: EvalQuery =
            serde_json::from_str(line).map_err(|source| EvalError::Line {
                location: format!("{}:{}", path.display(), index + 1),
                what: "query",
                source,
            })?;
        if query.query.trim().is_empty() {
            return Err(EvalError::Input(format!(
                "{}:{}: empty query",
                path.display(),
                index + 1
            )));
        }
        if let Some(unknown) = query.relevant.iter().find(|id| incidents.get(id).is_none()) {
            return Err(EvalError::Input(format!(
                "{}:{}: relevant incident {unknown} is not in the incidents file",
                path.display(),
                index + 1
            )));
        }
        if !seen.insert(query.id.clone()) {
            return Err(EvalError::Input(format!(
                "{}:{}: duplicate id {}",
                path.display(),
                index + 1,
                query.id
            )));
        }
        // Listed twice, an incident would count twice in recall's denominator and could
        // only be found once.
        let mut listed = HashSet::new();
        query.relevant.retain(|id| listed.insert(id.clone()));
        queries.push(query);
    }
    if queries.is_empty() {
        return Err(EvalError::Input(format!(
            "{} holds no query",
            path.display()
        )));
    }
    Ok(queries)
}

/// The queries as asked of a memory that holds only some of the incidents (`holds`): a
/// sibling query keeps only the held incidents as relevant, and one none of whose incidents
/// is held is dropped rather than turned into a novel one.
pub fn queries_about(queries: &[EvalQuery], holds: impl Fn(&str) -> bool) -> Vec<EvalQuery> {
    queries
        .iter()
        .filter_map(|q| {
            let mut q = q.clone();
            if q.relevant.is_empty() {
                return Some(q);
            }
            q.relevant.retain(|id| holds(id));
            (!q.relevant.is_empty()).then_some(q)
        })
        .collect()
}

pub fn read(path: &Path) -> Result<String, EvalError> {
    std::fs::read_to_string(path).map_err(|source| EvalError::Read {
        path: path.to_owned(),
        source,
    })
}

/// A fresh org id for one eval run: nothing else ever writes there, so the run needs no
/// cleanup to be isolated and never touches real data. Time and pid make it unique without
/// a uuid dependency.
pub fn namespace(kind: &str) -> String {
    let now = chrono::Utc::now();
    format!(
        "eval-{kind}-{}{:09}-{}",
        now.timestamp(),
        now.timestamp_subsec_nanos(),
        std::process::id()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two incident records (the import format plus `cluster`) as JSON lines.
    fn records(ids: &[&str]) -> String {
        ids.iter()
            .map(|id| {
                serde_json::json!({
                    "id": id, "org": "acme", "team": "checkout", "cluster": format!("f-{id}"),
                    "title": "t", "issue_type": "cache-miss", "issue_description": "d",
                    "symptoms": "s", "components": [], "root_cause": "r", "resolution": null,
                    "verification": null, "summary": "sum", "skills_used": [],
                    "resolved": true, "root_cause_confidence": "confirmed",
                    "significance": "incident", "ruled_out": [], "created": "2026-01-01",
                    "source": "composite"
                })
                .to_string()
                    + "\n"
            })
            .collect()
    }

    fn scratch(name: &str, text: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!("deja-corpus-{}-{name}", std::process::id()));
        std::fs::write(&path, text).expect("write a scratch corpus");
        path
    }

    #[test]
    fn several_incident_files_read_as_one_corpus_in_order() {
        let dev = scratch("dev.jsonl", &records(&["a", "b"]));
        let fold = scratch("fold.jsonl", &records(&["c"]));
        let all = Incidents::load_all(&[dev.clone(), fold.clone()]).expect("both files load");
        let ids: Vec<&str> = all.records.iter().map(|(_, r)| r.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(all.family("c"), "f-c");
        assert_eq!(all.family("a"), "f-a");

        let again = Incidents::load_all(&[dev.clone(), dev.clone()]);
        let Err(EvalError::Input(message)) = again else {
            panic!("an id in two files must be an error");
        };
        assert!(message.contains("duplicate id a"), "{message}");
        assert!(Incidents::load_all(&[]).is_err());
        for path in [dev, fold] {
            let _ = std::fs::remove_file(path);
        }
    }

    #[test]
    fn an_incident_listed_twice_as_relevant_counts_once() {
        let incidents_path = scratch("twice-incidents.jsonl", &records(&["a", "b"]));
        let incidents = Incidents::load_all(std::slice::from_ref(&incidents_path)).unwrap();
        let queries_path = scratch(
            "twice-queries.jsonl",
            "{\"id\": \"q-1\", \"query\": \"redis evictions\", \"relevant\": [\"a\", \"b\", \"a\"]}\n",
        );
        let queries = load_queries(&queries_path, &incidents).expect("the queries load");
        assert_eq!(queries[0].relevant, ["a", "b"]);
        for path in [incidents_path, queries_path] {
            let _ = std::fs::remove_file(path);
        }
    }

    #[test]
    fn families_come_from_the_raw_lines_only() {
        let text = "{\"id\": \"a\", \"cluster\": \"f1\"}\nnot json\n{\"id\": \"b\"}\n";
        let families = families(text);
        assert_eq!(families.len(), 1);
        assert_eq!(families["a"], "f1");
    }

    #[test]
    fn a_query_family_is_its_incidents_family_or_novel() {
        let incidents = Incidents {
            records: Vec::new(),
            families: [("a", "f1"), ("b", "f1"), ("c", "f2")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        };
        assert_eq!(incidents.query_family(&["a".into(), "b".into()]), "f1");
        assert_eq!(incidents.query_family(&["a".into(), "c".into()]), "f1+f2");
        assert_eq!(incidents.query_family(&[]), NOVEL);
    }

    #[test]
    fn namespaces_do_not_repeat() {
        assert_ne!(namespace("retrieval"), namespace("retrieval"));
        assert!(namespace("x").starts_with("eval-x-"));
    }
}
