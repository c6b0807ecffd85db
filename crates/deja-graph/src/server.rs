//! What the connected Neo4j server can do, and which vector index the store searches.
//!
//! deja runs on Neo4j 5.26 LTS and on the 2026 calendar releases. The newer servers filter a
//! vector search inside the index (Cypher 25 `SEARCH ... WHERE`), which needs the filter
//! properties declared on the index (migration 009); 5.26 has neither, so its store keeps the
//! post-filtered `episode_embedding` index and the over-fetching plan (crate::search).

use crate::queries::{INDEX_OPTIONS, SERVER_VERSION};
use crate::{column, GraphError, GraphStore, Result};
use std::sync::atomic::{AtomicU8, Ordering};

/// A server feature that a migration or a search path needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerFeature {
    /// Cypher 25 `SEARCH e IN (VECTOR INDEX ... WHERE ...)` on filter properties declared
    /// with the index (`WITH [e.org, ...]`): Neo4j 2026.01 and later.
    VectorSearchFilters,
}

/// The server's kernel version, e.g. `5.26.30` or `2026.08.1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerVersion {
    pub text: String,
    /// The first number: 5 for 5.26, the year for calendar versions (2025.01 onwards).
    pub major: u32,
    pub minor: u32,
}

impl ServerVersion {
    pub fn parse(text: &str) -> Option<ServerVersion> {
        let mut numbers = text.split(['.', '-']).map(str::parse::<u32>);
        let major = numbers.next()?.ok()?;
        let minor = numbers.next()?.ok()?;
        Some(ServerVersion {
            text: text.to_owned(),
            major,
            minor,
        })
    }

    pub fn supports(&self, feature: ServerFeature) -> bool {
        match feature {
            ServerFeature::VectorSearchFilters => self.major >= 2026,
        }
    }
}

/// The vector index over episode embeddings that this database has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VectorIndex {
    /// `episode_embedding` (migration 003): nearest neighbours of every tenant; searches
    /// post-filter them and over-fetch.
    Global,
    /// `episode_embedding_scoped` (migration 009): org, team and status are filter
    /// properties, so a search asks the index for the tenant's own nearest neighbours.
    Scoped,
}

impl VectorIndex {
    pub fn name(self) -> &'static str {
        match self {
            VectorIndex::Global => "episode_embedding",
            VectorIndex::Scoped => "episode_embedding_scoped",
        }
    }
}

/// The detected [`VectorIndex`], shared by a store's clones: 0 = not known yet.
#[derive(Debug, Default)]
pub(crate) struct DetectedIndex(AtomicU8);

impl DetectedIndex {
    fn get(&self) -> Option<VectorIndex> {
        match self.0.load(Ordering::Relaxed) {
            1 => Some(VectorIndex::Global),
            2 => Some(VectorIndex::Scoped),
            _ => None,
        }
    }

    fn set(&self, index: Option<VectorIndex>) {
        let value = match index {
            None => 0,
            Some(VectorIndex::Global) => 1,
            Some(VectorIndex::Scoped) => 2,
        };
        self.0.store(value, Ordering::Relaxed);
    }
}

impl GraphStore {
    /// The server's kernel version (one round trip).
    pub async fn server_version(&self) -> Result<ServerVersion> {
        let rows = self.fetch(SERVER_VERSION.statement()).await?;
        let Some(row) = rows.first() else {
            return Err(GraphError::decode(SERVER_VERSION.name, "no row"));
        };
        let text: String = column(row, SERVER_VERSION.name, "version")?;
        ServerVersion::parse(&text).ok_or_else(|| {
            GraphError::decode(SERVER_VERSION.name, format!("unknown version `{text}`"))
        })
    }

    /// Which vector index the episodes have: asked once, then remembered by this store and
    /// its clones (`migrate` asks again, since it may replace the index).
    pub async fn vector_index(&self) -> Result<VectorIndex> {
        if let Some(index) = self.vector_index.get() {
            return Ok(index);
        }
        let scoped = self
            .index_options::<serde::de::IgnoredAny>(VectorIndex::Scoped.name())
            .await?;
        let index = if scoped.is_some() {
            VectorIndex::Scoped
        } else {
            VectorIndex::Global
        };
        self.vector_index.set(Some(index));
        Ok(index)
    }

    pub(crate) fn forget_vector_index(&self) {
        self.vector_index.set(None);
    }

    /// The `options` map of the index `name`, `None` when there is no such index.
    pub(crate) async fn index_options<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
    ) -> Result<Option<T>> {
        let rows = self
            .fetch(INDEX_OPTIONS.statement().param("name", name))
            .await?;
        rows.first()
            .map(|row| column(row, INDEX_OPTIONS.name, "options"))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_only_calendar_2026_filters_vector_searches() {
        let lts = ServerVersion::parse("5.26.30").unwrap();
        assert_eq!((lts.major, lts.minor), (5, 26));
        assert!(!lts.supports(ServerFeature::VectorSearchFilters));
        let calendar = ServerVersion::parse("2026.08.1").unwrap();
        assert_eq!((calendar.major, calendar.minor), (2026, 8));
        assert!(calendar.supports(ServerFeature::VectorSearchFilters));
        assert!(!ServerVersion::parse("2025.10.1")
            .unwrap()
            .supports(ServerFeature::VectorSearchFilters));
        assert!(ServerVersion::parse("dev").is_none());
    }
}
