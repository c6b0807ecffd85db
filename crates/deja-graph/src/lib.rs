//! Neo4j adapter: migrations, the episode store, semantic, text and timeline search.
//!
//! # Graph model
//!
//! ```text
//! (:Episode {key, id, org, team, ..., version})-[:AFFECTS]->(:Component {key, org, type, name})
//! (:Episode)-[:USED_SKILL]->(:Skill {key, org, name})
//! (:TurnInput {key, org, team, correlation_id, turn_index, event_json})   -- apart, for `deja retry`
//! (:EpisodeTokens {episode_id, org, model, stamp, dims, count, vectors}) -- apart, see tokens.rs
//! (:Episode)-[:HAS_REVIEW]->(:Review {at, by, action, changes_json, version})  -- see review.rs
//! (:Episode)-[:RECURRENCE_OF {detected_at, confidence, by, confirmed_by, confirmed_at}]->(:Episode)
//! (:Episode)-[:NOT_RECURRENCE_OF {by, at}]->(:Episode)  -- a link a person removed
//! (:Strategy {key, org, team, issue_type, component_type, component_name, markdown, ...})
//!     -[:SYNTHESIZED_FROM]->(:Episode)                                   -- see strategies.rs
//! (:SchemaMigration {version, name, applied_at})
//! ```
//!
//! Org and team are properties of the episode, not nodes: every read is scoped by them and
//! an index seek on a property is the cheapest scope there is; nothing traverses from a team.
//! A component is one node per org (its key starts with the org), shared by that org's
//! episodes so that the Browser can show everything that touched it, and never reaching
//! another org's episodes; skills (the agent runtime's tool names) are one node per org too
//! (migration 013). A component no episode refers to any more is deleted by a vocabulary
//! merge (`vocab/delete_orphan_components.cypher`); otherwise neither is deleted when an
//! episode stops referring to it.
//! The property layout is documented in [`rows`].
//!
//! Architecture invariant: every Cypher statement lives in `cypher/`, is embedded with
//! `include_str!`, takes values as parameters only, and is run by an integration test.
//!
//! Architecture invariant: each write is one transaction guarded by the episode's `version`
//! (optimistic concurrency); relationships change in the same transaction as properties.

mod episodes;
mod error;
mod listing;
mod lucene;
pub mod metrics;
mod migrate;
mod queries;
mod reembed;
mod review;
pub mod rows;
mod search;
mod server;
mod strategies;
mod tokens;
mod turn_inputs;
mod vocabulary;

pub use episodes::{SaveOutcome, UpsertError, MAX_UPSERT_ATTEMPTS};
pub use error::{GraphError, Result};
pub use listing::{ListFilter, VOCABULARY_LIMIT};
pub use lucene::escape_user_text;
pub use migrate::{MigrationReport, MIGRATIONS};
pub use reembed::ReembedItem;
pub use review::{
    AutoLink, ChainEpisode, Deletion, FedStrategy, RecurrenceLink, Recurrences, RejectedLink,
    ReviewFilter, ReviewOrder, ReviewPage, ReviewRecord, VerdictFilter, RECOGNITION,
};
pub use rows::{component_key, skill_key};
pub use search::{SearchFilters, SearchPlanSettings};
pub use server::{ServerFeature, ServerVersion, VectorIndex};
pub use strategies::*;
pub use tokens::{CauseVector, RetokenizeItem, StoredTokens, TokensSource};
pub use turn_inputs::MAX_UNTRUSTED_CHARS;
pub use vocabulary::{OrgVocabulary, VocabEntry, VocabMerge, ORG_VOCABULARY_LIMIT};

use deja_config::Neo4jSettings;
use queries::Statement;
use serde::Deserialize;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// How long opening one Bolt connection may take before the call fails as transient (neo4rs
/// also waits this long, at most, for each response).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The same bound for [`GraphStore::maintenance_pool`]: one batched data migration over
/// ~100k episodes takes minutes on 2 cores.
const MAINTENANCE_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// A Bolt connection pool. Connections open lazily, so this fails only on bad settings.
fn pool(
    settings: &Neo4jSettings,
    max_connections: usize,
    timeout: Duration,
) -> Result<neo4rs::Graph> {
    let config = neo4rs::ConfigBuilder::default()
        .uri(settings.uri.as_str())
        .user(settings.user.as_str())
        .password(settings.password.expose())
        .db(settings.database.as_str())
        .fetch_size(settings.fetch_size)
        .max_connections(max_connections)
        .connection_timeout(timeout)
        .build()
        .map_err(|source| GraphError::Config { source })?;
    neo4rs::Graph::connect(config).map_err(|source| GraphError::Config { source })
}

/// The episode store. Cheap to clone: clones share one connection pool.
#[derive(Clone)]
pub struct GraphStore {
    graph: neo4rs::Graph,
    /// Kept to open [`GraphStore::maintenance_pool`] when a migration needs it.
    settings: Arc<Neo4jSettings>,
    /// Which vector index the database has (crate::server), detected on first use.
    vector_index: Arc<server::DetectedIndex>,
}

impl std::fmt::Debug for GraphStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GraphStore")
    }
}

impl GraphStore {
    /// Builds the connection pool. Connections open lazily: this fails only on bad settings,
    /// so a process can start before Neo4j does; call [`GraphStore::ping`] to check.
    pub async fn connect(settings: &Neo4jSettings) -> Result<GraphStore> {
        let graph = pool(settings, settings.max_connections, CONNECT_TIMEOUT)?;
        Ok(GraphStore {
            graph,
            settings: Arc::new(settings.clone()),
            vector_index: Arc::default(),
        })
    }

    /// The same store over a pool of its own of `max_connections` connections, opened lazily
    /// like [`GraphStore::connect`]'s: for a probe that must not queue behind the statements
    /// holding the shared pool (`deja serve`'s `/readyz` while searches saturate it).
    pub fn with_own_pool(&self, max_connections: usize) -> Result<GraphStore> {
        Ok(GraphStore {
            graph: pool(&self.settings, max_connections.max(1), CONNECT_TIMEOUT)?,
            settings: self.settings.clone(),
            vector_index: self.vector_index.clone(),
        })
    }

    /// A one-connection pool for statements that may run for minutes (data migrations over a
    /// large store). neo4rs uses its connection timeout as the receive timeout of every
    /// response too, so on the normal pool such a statement fails as "connection timed out"
    /// while the server is still working.
    pub(crate) fn maintenance_pool(&self) -> Result<neo4rs::Graph> {
        pool(&self.settings, 1, MAINTENANCE_TIMEOUT)
    }

    /// One round trip (`RETURN 1`): Neo4j is reachable, the credentials and database work.
    pub async fn ping(&self) -> Result<()> {
        let rows = self.fetch(queries::PING.statement()).await?;
        match rows.first() {
            Some(row) => column::<i64>(row, queries::PING.name, "ok").map(|_| ()),
            None => Err(GraphError::decode(queries::PING.name, "no row")),
        }
    }

    /// Runs a read statement and collects its rows.
    async fn fetch(&self, statement: Statement) -> Result<Vec<neo4rs::Row>> {
        self.collect(statement, false).await
    }

    /// Runs a read whose statement takes the write lock of the nodes it returns (a `SET` of
    /// `_lock`) in a transaction that is always rolled back, so nothing is written, and
    /// collects its rows. A plain read may overlap a writer's commit and return some
    /// properties from before it and some from after (Neo4j reads committed data, not one
    /// snapshot: under 20 racing writers about one read in 40 mixed two versions of an
    /// episode). Under the lock no commit to those nodes is in flight. For the reads a write
    /// is computed from.
    ///
    /// The transaction runs in a task of its own ([`to_completion`]).
    async fn fetch_locked(&self, statement: Statement) -> Result<Vec<neo4rs::Row>> {
        let name = statement.name;
        let _timer = crate::metrics::QueryTimer::start(name);
        let graph = self.graph.clone();
        to_completion(name, async move {
            let fail = |e| GraphError::neo4j(name, e);
            let mut txn = graph.start_txn().await.map_err(fail)?;
            let rows = crate::episodes::collect_in(&mut txn, statement.query).await;
            crate::episodes::rollback(txn).await;
            rows.map_err(fail)
        })
        .await
    }

    /// Runs a statement that writes and collects its rows.
    async fn fetch_write(&self, statement: Statement) -> Result<Vec<neo4rs::Row>> {
        self.collect(statement, true).await
    }

    async fn collect(&self, statement: Statement, write: bool) -> Result<Vec<neo4rs::Row>> {
        let name = statement.name;
        // A guard rather than a wrapping future: one more async layer here deepens every
        // search future past rustc's default layout recursion limit.
        let _timer = crate::metrics::QueryTimer::start(name);
        let fail = |e| GraphError::neo4j(name, e);
        let mut stream = if write {
            self.graph.execute(statement.query).await
        } else {
            self.graph.execute_read(statement.query).await
        }
        .map_err(fail)?;
        let mut rows = Vec::new();
        while let Some(row) = stream.next().await.map_err(fail)? {
            rows.push(row);
        }
        Ok(rows)
    }

    async fn run(&self, statement: Statement) -> Result<()> {
        let name = statement.name;
        self.graph
            .run(statement.query)
            .await
            .map(|_| ())
            .map_err(|e| GraphError::neo4j(name, e))
    }
}

/// Runs `transaction` (one that holds locks: an explicit transaction, begun and ended inside
/// it) in a task of its own and waits for it. A caller that stops waiting (a search deadline,
/// an HTTP client gone) drops only the wait: the transaction still ends, where a dropped
/// transaction would stay open on its pooled connection, holding its locks until that
/// connection is next reused, and writers would wait on them meanwhile.
async fn to_completion<T: Send + 'static>(
    query: &'static str,
    transaction: impl Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    match tokio::spawn(transaction).await {
        Ok(result) => result,
        Err(stopped) if stopped.is_panic() => std::panic::resume_unwind(stopped.into_panic()),
        Err(_) => Err(GraphError::Interrupted { query }),
    }
}

/// Reads one column of a row, naming the query and column when the shape is wrong.
fn column<'r, T: Deserialize<'r>>(
    row: &'r neo4rs::Row,
    query: &'static str,
    name: &str,
) -> Result<T> {
    row.get::<T>(name)
        .map_err(|e| GraphError::decode(query, format!("column `{name}`: {e}")))
}

/// The fields an episode's embedded text and cause text are made of, as the queries that
/// page episodes for re-encoding return them (`episodes/for_reembed`, `tokens/for_retokenize`).
struct TextColumns {
    issue_type: String,
    description: String,
    opening_message: Option<String>,
    summary: String,
    key_findings: Vec<String>,
    root_cause: Option<String>,
}

impl TextColumns {
    fn read(row: &neo4rs::Row, query: &'static str) -> Result<TextColumns> {
        Ok(TextColumns {
            issue_type: column(row, query, "issue_type")?,
            description: column(row, query, "issue_description")?,
            opening_message: column(row, query, "opening_message")?,
            summary: column(row, query, "summary")?,
            key_findings: column::<Option<Vec<String>>>(row, query, "key_findings")?
                .unwrap_or_default(),
            root_cause: column(row, query, "root_cause")?,
        })
    }

    /// [`deja_domain::embedding_text`] of these fields.
    fn embedding_text(&self) -> String {
        deja_domain::embedding_text(
            &self.issue_type,
            &self.description,
            self.opening_message.as_deref(),
            &self.summary,
            &self.key_findings,
            self.root_cause.as_deref(),
        )
    }

    /// [`deja_domain::cause_text`] of these fields.
    fn cause_text(&self) -> String {
        deja_domain::cause_text(
            &self.issue_type,
            &self.description,
            &self.summary,
            self.root_cause.as_deref(),
        )
    }
}

/// Reads an episode map column (`e {.*}`) and validates it.
fn episode_column(
    row: &neo4rs::Row,
    query: &'static str,
    name: &str,
) -> Result<deja_domain::Episode> {
    column::<rows::EpisodeRow>(row, query, name)?
        .into_episode()
        .map_err(|detail| GraphError::decode(query, detail))
}
