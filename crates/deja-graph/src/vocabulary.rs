//! One vocabulary per org: what `deja vocab list` shows, what the LLM is offered for reuse,
//! and `deja vocab merge`, which folds one spelling into another in a single transaction.

use crate::episodes::{rollback, txn_rows, TxnError};
use crate::queries::{
    Statement, DELETE_ORPHAN_COMPONENTS, MERGE_ISSUE_TYPE, ORG_COMPONENTS, ORG_ISSUE_TYPES,
    RELINK_COMPONENT, SYNC_COMPONENT_LISTS,
};
use crate::rows::int;
use crate::{column, GraphError, GraphStore, Result};
use deja_domain::{Component, EpisodeKey, VocabKind, Vocabulary};

/// At most this many issue types and this many components of an org are offered to the LLM
/// (the most used first): the list is pasted into every prompt.
pub const ORG_VOCABULARY_LIMIT: usize = 40;

/// A description longer than this is cut for the prompt.
const MAX_DESCRIPTION_CHARS: usize = 140;

/// One name in use, with how many `ok` episodes use it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct VocabEntry {
    pub name: String,
    pub uses: i64,
    /// Issue types: the root cause of the latest resolved episode (else its description).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Components: their type.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub component_type: Option<String>,
}

/// An org's issue types and components, most used first.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct OrgVocabulary {
    pub issue_types: Vec<VocabEntry>,
    pub components: Vec<VocabEntry>,
}

impl OrgVocabulary {
    /// What the extraction prompt offers: names, descriptions bounded.
    pub fn for_prompt(&self) -> Vocabulary {
        Vocabulary {
            issue_types: self.issue_types.iter().map(|e| e.name.clone()).collect(),
            components: self
                .components
                .iter()
                .map(|e| Component::new(e.component_type.clone().unwrap_or_default(), &e.name))
                .collect(),
            issue_type_descriptions: self
                .issue_types
                .iter()
                .filter_map(|e| {
                    let description = e.description.as_deref()?.trim();
                    (!description.is_empty()).then(|| {
                        let cut: String = description.chars().take(MAX_DESCRIPTION_CHARS).collect();
                        (e.name.clone(), cut)
                    })
                })
                .collect(),
        }
    }
}

/// What a merge changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct VocabMerge {
    /// Episodes rewritten.
    pub episodes: i64,
    /// Component nodes deleted because nothing linked to them any more.
    pub components_deleted: i64,
}

impl GraphStore {
    /// The org's issue types (with descriptions) and components, every team, most used
    /// first, at most `limit` of each.
    pub async fn org_vocabulary(&self, org: &str, limit: usize) -> Result<OrgVocabulary> {
        self.vocabulary_of(org, limit, None).await
    }

    /// What the extraction of a turn of the conversation `key` is offered: the org's
    /// vocabulary, with the issue types counted over every episode but the conversation's own.
    /// Its earlier turn's type reaches the prompt with the stored episode already; counted
    /// here too, with that turn's guess as its description, a type named after a hypothesis
    /// the conversation later abandoned read as the org's settled name for it and outlived
    /// the hypothesis. Its components stay: naming them alike on every turn is the point.
    pub async fn vocabulary_offered_to(
        &self,
        key: &EpisodeKey,
        limit: usize,
    ) -> Result<OrgVocabulary> {
        self.vocabulary_of(&key.org, limit, Some(&key.correlation_id))
            .await
    }

    async fn vocabulary_of(
        &self,
        org: &str,
        limit: usize,
        besides: Option<&str>,
    ) -> Result<OrgVocabulary> {
        let scoped = |statement: Statement| statement.param("org", org).param("limit", int(limit));
        let issue_types = self
            .fetch(scoped(ORG_ISSUE_TYPES.statement()).param("besides", besides))
            .await?
            .iter()
            .map(|row| {
                let description: String = column(row, ORG_ISSUE_TYPES.name, "description")?;
                Ok(VocabEntry {
                    name: column(row, ORG_ISSUE_TYPES.name, "issue_type")?,
                    uses: column(row, ORG_ISSUE_TYPES.name, "uses")?,
                    description: (!description.is_empty()).then_some(description),
                    component_type: None,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let components = self
            .fetch(scoped(ORG_COMPONENTS.statement()))
            .await?
            .iter()
            .map(|row| {
                Ok(VocabEntry {
                    name: column(row, ORG_COMPONENTS.name, "name")?,
                    uses: column(row, ORG_COMPONENTS.name, "uses")?,
                    description: None,
                    component_type: Some(column(row, ORG_COMPONENTS.name, "type")?),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(OrgVocabulary {
            issue_types,
            components,
        })
    }

    /// Folds the name `from` (as stored) into `into` (normalised first) for every episode of
    /// `org`, in one transaction: issue types are rewritten on the episodes; components are
    /// re-linked (`AFFECTS`), the episodes' component lists rewritten, and a `from`
    /// component left without any edge deleted. Every rewritten episode's version is bumped,
    /// so a concurrent worker write retries on the merged data.
    pub async fn merge_vocabulary(
        &self,
        org: &str,
        kind: VocabKind,
        from: &str,
        into: &str,
    ) -> Result<VocabMerge> {
        let into = kind.normalize(into);
        if org.trim().is_empty() || from.trim().is_empty() || into.is_empty() {
            return Err(GraphError::invalid(
                "vocab merge",
                "org and both names must not be empty",
            ));
        }
        if from == into {
            return Ok(VocabMerge::default());
        }
        let graph = self.graph.clone();
        let (org, from) = (org.to_owned(), from.to_owned());
        // In a task of its own: a caller that stops waiting must not leave the transaction
        // open holding every merged episode's lock (`to_completion`).
        crate::to_completion("vocab/merge", async move {
            let mut txn = graph
                .start_txn()
                .await
                .map_err(|e| GraphError::neo4j("vocab/merge", e))?;
            let outcome = merge_in(&mut txn, &org, kind, &from, &into).await;
            match outcome {
                Ok(merge) => match txn.commit().await {
                    Ok(_) => Ok(merge),
                    Err(e) => Err(GraphError::neo4j("vocab/merge", e)),
                },
                Err(e) => {
                    rollback(txn).await;
                    Err(match e {
                        TxnError::Deadlock => GraphError::invalid(
                            "vocab merge",
                            "a concurrent write got in the way; run the merge again",
                        ),
                        TxnError::Graph(e) => e,
                    })
                }
            }
        })
        .await
    }
}

async fn merge_in(
    txn: &mut neo4rs::Txn,
    org: &str,
    kind: VocabKind,
    from: &str,
    into: &str,
) -> std::result::Result<VocabMerge, TxnError> {
    match kind {
        VocabKind::IssueType => {
            let rows = txn_rows(
                txn,
                MERGE_ISSUE_TYPE
                    .statement()
                    .param("org", org)
                    .param("from", from)
                    .param("into", into),
            )
            .await?;
            Ok(VocabMerge {
                episodes: count(&rows, MERGE_ISSUE_TYPE.name, "episodes")?,
                components_deleted: 0,
            })
        }
        VocabKind::Component => {
            let rows = txn_rows(
                txn,
                RELINK_COMPONENT
                    .statement()
                    .param("org", org)
                    .param("from", from)
                    .param("into", into)
                    .param("separator", "\u{1f}"),
            )
            .await?;
            let keys: Vec<String> = match rows.first() {
                Some(row) => column(row, RELINK_COMPONENT.name, "keys").map_err(TxnError::Graph)?,
                None => Vec::new(),
            };
            let rows = txn_rows(txn, SYNC_COMPONENT_LISTS.statement().param("keys", keys)).await?;
            let episodes = count(&rows, SYNC_COMPONENT_LISTS.name, "episodes")?;
            let rows = txn_rows(
                txn,
                DELETE_ORPHAN_COMPONENTS
                    .statement()
                    .param("org", org)
                    .param("from", from),
            )
            .await?;
            Ok(VocabMerge {
                episodes,
                components_deleted: count(&rows, DELETE_ORPHAN_COMPONENTS.name, "deleted")?,
            })
        }
    }
}

/// The count in the first row's column `col` (0 without rows).
fn count(
    rows: &[neo4rs::Row],
    name: &'static str,
    col: &str,
) -> std::result::Result<i64, TxnError> {
    match rows.first() {
        Some(row) => column::<i64>(row, name, col).map_err(TxnError::Graph),
        None => Ok(0),
    }
}
