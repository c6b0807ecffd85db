//! Reading and writing one episode: optimistic concurrency on `version`.
//!
//! A save is one transaction: `claim` (find or create the node and take its write lock, then
//! read its version), `write` (every property, version + 1), `sync_components` and
//! `sync_skills` (relationships). If the version is not the one the caller read, the
//! transaction is rolled back and the caller gets [`SaveOutcome::Conflict`]: somebody else
//! wrote in between, re-read and merge again. [`GraphStore::upsert_with`] is that loop.
//! The reads a merge starts from see one committed version (`GraphStore::fetch_locked`).

use crate::error::is_deadlock;
use crate::queries::{Statement, CLAIM, GET_BY_ID, GET_BY_KEY, SYNC_COMPONENTS, SYNC_SKILLS};
use crate::rows::{component_maps, skill_maps, write_statement};
use crate::{column, episode_column, GraphError, GraphStore, Result};
use deja_domain::{Episode, EpisodeKey};
use rand::Rng;
use std::future::Future;
use std::time::Duration;

/// Re-read-and-merge rounds before [`UpsertError::TooManyConflicts`]. Twenty writers racing
/// on one conversation settle well within this with the jittered backoff below.
pub const MAX_UPSERT_ATTEMPTS: u32 = 40;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaveOutcome {
    /// Committed; the stored episode now has this version.
    Saved { version: i64 },
    /// The stored version was not the expected one (or the episode already existed when a
    /// create was asked, or a deadlock aborted the race). Nothing was written.
    Conflict,
}

/// Why an [`GraphStore::upsert_with`] gave up.
#[derive(Debug, thiserror::Error)]
pub enum UpsertError<E> {
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// The merge function failed; its error is passed through untouched.
    #[error("merging into the episode failed")]
    Merge(#[source] E),
    #[error("episode kept changing under {attempts} attempts to write it")]
    TooManyConflicts { attempts: u32 },
}

impl<E> UpsertError<E> {
    /// Transient store errors and conflict exhaustion are worth retrying later; a merge
    /// error is whatever the caller decides.
    pub fn is_transient(&self) -> bool {
        match self {
            UpsertError::Graph(e) => e.is_transient(),
            UpsertError::TooManyConflicts { .. } => true,
            UpsertError::Merge(_) => false,
        }
    }
}

impl GraphStore {
    /// The episode of one conversation, embedding included, as one committed version (read
    /// under the episode's write lock, see `read_episode`).
    pub async fn get_by_key(&self, key: &EpisodeKey) -> Result<Option<Episode>> {
        self.read_episode(GET_BY_KEY.statement().param("key", key.composite()))
            .await
    }

    /// One episode by id, embedding included, as one committed version. With `org`, an
    /// episode of another org is `None`, exactly as if it did not exist.
    pub async fn get_by_id(&self, org: Option<&str>, id: &str) -> Result<Option<Episode>> {
        self.read_episode(GET_BY_ID.statement().param("id", id).param("org", org))
            .await
    }

    /// Reads one episode under its write lock ([`GraphStore::fetch_locked`]): a merge computed
    /// from a read that mixed two versions would write the mix back for good.
    async fn read_episode(&self, statement: Statement) -> Result<Option<Episode>> {
        let name = statement.name;
        let rows = self.fetch_locked(statement).await?;
        rows.first()
            .map(|row| episode_column(row, name, "episode"))
            .transpose()
    }

    /// Writes `episode` if the stored version is `expected_version` (`None` = it must not
    /// exist yet). The episode's own `version` field is ignored; the stored version becomes
    /// `expected_version + 1` (1 for a new episode) and is returned.
    pub async fn save(
        &self,
        episode: &Episode,
        expected_version: Option<i64>,
    ) -> Result<SaveOutcome> {
        self.save_then(episode, expected_version, |_| None).await
    }

    /// [`GraphStore::save`], plus one more statement in the same transaction after the
    /// write (a review's audit record), built from the new version.
    pub(crate) async fn save_then(
        &self,
        episode: &Episode,
        expected_version: Option<i64>,
        after: impl FnOnce(i64) -> Option<Statement> + Send + 'static,
    ) -> Result<SaveOutcome> {
        const NAME: &str = "episodes/save";
        let key = episode.key();
        if episode.id.is_empty() || key.org.is_empty() || key.correlation_id.is_empty() {
            return Err(GraphError::invalid(
                "episode",
                "id, org and correlation_id must not be empty",
            ));
        }
        let graph = self.graph.clone();
        let episode = episode.clone();
        // In a task of its own (`to_completion`): a caller that stops waiting, such as an
        // HTTP request whose client went away, must not leave the transaction open.
        crate::to_completion(NAME, async move {
            let mut txn = graph
                .start_txn()
                .await
                .map_err(|e| GraphError::neo4j(NAME, e))?;
            let mut outcome = save_in(&mut txn, &episode, expected_version).await;
            if let Ok(Some(version)) = outcome {
                if let Some(statement) = after(version) {
                    outcome = txn_run(&mut txn, statement).await.map(|()| Some(version));
                }
            }
            // A transaction left open would hold the episode's lock until its pooled
            // connection is reused, so every path ends it explicitly.
            match outcome {
                Ok(Some(version)) => match txn.commit().await {
                    Ok(_) => Ok(SaveOutcome::Saved { version }),
                    Err(e) if is_deadlock(&e) => Ok(SaveOutcome::Conflict),
                    Err(e) => Err(GraphError::neo4j(NAME, e)),
                },
                Ok(None) => {
                    rollback(txn).await;
                    Ok(SaveOutcome::Conflict)
                }
                Err(e) => {
                    rollback(txn).await;
                    match e {
                        TxnError::Deadlock => Ok(SaveOutcome::Conflict),
                        TxnError::Graph(e) => Err(e),
                    }
                }
            }
        })
        .await
    }

    /// The optimistic write loop: reads the episode, lets `merge` compute the new one
    /// (`Ok(None)` = nothing to write), saves it against the version read, and on a conflict
    /// sleeps a little (jittered, growing) and starts over from a fresh read. Returns the
    /// saved episode (with its new version), or `None` when `merge` had nothing to write.
    pub async fn upsert_with<F, Fut, E>(
        &self,
        key: &EpisodeKey,
        merge: F,
    ) -> Result<Option<Episode>, UpsertError<E>>
    where
        F: FnMut(Option<Episode>) -> Fut,
        Fut: Future<Output = Result<Option<Episode>, E>>,
    {
        let current = self.get_by_key(key).await?;
        self.upsert_from(key, current, merge).await
    }

    /// [`GraphStore::upsert_with`] whose first attempt merges into `read`, the episode the
    /// caller already read: the compare-and-set on its version makes a stale read cost one
    /// more attempt, never a lost write. Later attempts read afresh.
    pub async fn upsert_from<F, Fut, E>(
        &self,
        key: &EpisodeKey,
        read: Option<Episode>,
        mut merge: F,
    ) -> Result<Option<Episode>, UpsertError<E>>
    where
        F: FnMut(Option<Episode>) -> Fut,
        Fut: Future<Output = Result<Option<Episode>, E>>,
    {
        let mut first_read = Some(read);
        for attempt in 0..MAX_UPSERT_ATTEMPTS {
            let current = match first_read.take() {
                Some(read) => read,
                None => self.get_by_key(key).await?,
            };
            let expected = current.as_ref().map(|e| e.version);
            let Some(mut next) = merge(current).await.map_err(UpsertError::Merge)? else {
                return Ok(None);
            };
            if &next.key() != key {
                return Err(GraphError::invalid(
                    "merge result",
                    "the merged episode has a different key than the one upserted",
                )
                .into());
            }
            match self.save(&next, expected).await? {
                SaveOutcome::Saved { version } => {
                    next.version = version;
                    return Ok(Some(next));
                }
                SaveOutcome::Conflict => {
                    tracing::debug!(attempt, "episode changed while merging; retrying");
                    tokio::time::sleep(conflict_backoff(attempt)).await;
                }
            }
        }
        Err(UpsertError::TooManyConflicts {
            attempts: MAX_UPSERT_ATTEMPTS,
        })
    }
}

/// Full jitter over a window that doubles from 4 ms up to 128 ms: racing writers spread out
/// instead of colliding again in lock step.
fn conflict_backoff(attempt: u32) -> Duration {
    let window_ms = 4u64 << attempt.min(5);
    Duration::from_millis(rand::rng().random_range(1..=window_ms))
}

pub(crate) enum TxnError {
    Deadlock,
    Graph(GraphError),
}

fn txn_error(name: &'static str) -> impl Fn(neo4rs::Error) -> TxnError {
    move |e| {
        if is_deadlock(&e) {
            TxnError::Deadlock
        } else {
            TxnError::Graph(GraphError::neo4j(name, e))
        }
    }
}

/// The body of a save; `Ok(None)` = version conflict (the caller rolls back).
async fn save_in(
    txn: &mut neo4rs::Txn,
    episode: &Episode,
    expected_version: Option<i64>,
) -> Result<Option<i64>, TxnError> {
    let key = episode.key().composite();
    let rows = txn_rows(txn, CLAIM.statement().param("key", key.as_str())).await?;
    let Some(row) = rows.first() else {
        return Err(TxnError::Graph(GraphError::decode(CLAIM.name, "no row")));
    };
    let stored: i64 = column(row, CLAIM.name, "version").map_err(TxnError::Graph)?;
    // Version 0 exists only inside this transaction: claim just created the node.
    let version = match expected_version {
        None if stored == 0 => 1,
        Some(expected) if expected > 0 && stored == expected => expected + 1,
        _ => return Ok(None),
    };
    txn_run(txn, write_statement(episode, version)).await?;
    let (component_keys, components) = component_maps(&episode.org, &episode.components);
    txn_run(
        txn,
        SYNC_COMPONENTS
            .statement()
            .param("key", key.as_str())
            .param("org", episode.org.as_str())
            .param("component_keys", component_keys)
            .param("components", components),
    )
    .await?;
    let (skill_keys, skills) = skill_maps(episode);
    txn_run(
        txn,
        SYNC_SKILLS
            .statement()
            .param("key", key.as_str())
            .param("org", episode.org.as_str())
            .param("skill_keys", skill_keys)
            .param("skills", skills),
    )
    .await?;
    Ok(Some(version))
}

pub(crate) async fn txn_rows(
    txn: &mut neo4rs::Txn,
    statement: Statement,
) -> Result<Vec<neo4rs::Row>, TxnError> {
    let fail = txn_error(statement.name);
    collect_in(txn, statement.query).await.map_err(fail)
}

/// Runs `query` in `txn` and collects its rows, the driver's error as it came.
pub(crate) async fn collect_in(
    txn: &mut neo4rs::Txn,
    query: neo4rs::Query,
) -> Result<Vec<neo4rs::Row>, neo4rs::Error> {
    let mut stream = txn.execute(query).await?;
    let mut rows = Vec::new();
    while let Some(row) = stream.next(txn.handle()).await? {
        rows.push(row);
    }
    Ok(rows)
}

pub(crate) async fn txn_run(txn: &mut neo4rs::Txn, statement: Statement) -> Result<(), TxnError> {
    let fail = txn_error(statement.name);
    txn.run(statement.query).await.map(|_| ()).map_err(fail)
}

/// Best effort: if the rollback itself fails the server ends the transaction when the pool
/// resets the connection.
pub(crate) async fn rollback(txn: neo4rs::Txn) {
    if let Err(e) = txn.rollback().await {
        tracing::debug!(error = %e, "rollback failed; the connection reset will end the transaction");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_stays_bounded() {
        for attempt in 0..100 {
            let d = conflict_backoff(attempt);
            assert!(d >= Duration::from_millis(1));
            assert!(d <= Duration::from_millis(128));
        }
        assert!(conflict_backoff(0) <= Duration::from_millis(4));
    }
}
