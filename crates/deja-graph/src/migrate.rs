//! Schema migrations: `cypher/schema/NNN_name.cypher`, applied in version order.
//!
//! File format: one or more schema statements, each ending with `;` at the end of a line;
//! lines starting with `//` are comments. Every statement must be idempotent on its own
//! (`IF NOT EXISTS`), because Neo4j cannot run schema changes and the `SchemaMigration` record
//! in one transaction: a migration interrupted half-way is simply applied again.
//! A version is recorded only after all its statements succeeded, and recorded versions are
//! skipped, so running `migrate` twice changes nothing the second time.
//!
//! A migration may need a server feature (`requires`, e.g. Neo4j 2026's vector search
//! filters). On a server without it the migration is skipped and not recorded, and it does
//! not count as missing: the same binary serves 5.26 and 2026, and an upgraded server gets the
//! migration at the next `migrate`.

use crate::queries::{APPLIED_MIGRATIONS, AWAIT_INDEXES, RECORD_MIGRATION};
use crate::server::{ServerFeature, ServerVersion};
use crate::{column, GraphError, GraphStore, Result};
use std::collections::BTreeSet;

/// One embedded migration file.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    pub version: i64,
    /// The file stem, `NNN_name`.
    pub file: &'static str,
    pub cypher: &'static str,
    /// Applied only on a server with this feature (see the module documentation).
    pub requires: Option<ServerFeature>,
}

macro_rules! migration {
    ($version:literal, $file:literal) => {
        migration!($version, $file, None)
    };
    ($version:literal, $file:literal, $requires:expr) => {
        Migration {
            version: $version,
            file: $file,
            requires: $requires,
            cypher: $crate::queries::cypher_file!("schema/", $file),
        }
    };
}

/// Every migration, in the order it is applied. A new file must be added here too (a unit
/// test compares this list with the directory).
pub const MIGRATIONS: &[Migration] = &[
    migration!(1, "001_episode_constraints"),
    migration!(2, "002_episode_indexes"),
    migration!(3, "003_episode_vector_index"),
    migration!(4, "004_episode_text_index"),
    migration!(5, "005_component_skill_constraints"),
    migration!(6, "006_strategy_turn_input_constraints"),
    migration!(7, "007_episode_scope_indexes"),
    migration!(8, "008_episode_embedding_float32"),
    migration!(
        9,
        "009_episode_embedding_filtered",
        Some(ServerFeature::VectorSearchFilters)
    ),
    migration!(10, "010_episode_issue_type_indexes"),
    migration!(11, "011_episode_embedding_float32_marker"),
    migration!(12, "012_component_per_org"),
    migration!(13, "013_skill_per_org"),
    migration!(14, "014_episode_tokens"),
    migration!(15, "015_episode_text_index_opening_message"),
];

/// How long `migrate` waits for new indexes to come online (the vector index populates in
/// the background).
const AWAIT_INDEXES_SECS: i64 = 300;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigrationReport {
    /// `NNN_name` of each migration applied by this call.
    pub applied: Vec<String>,
    /// How many were already recorded and skipped.
    pub already: usize,
}

impl Migration {
    /// `NNN_name`, as reported by [`MigrationReport::applied`].
    pub fn label(&self) -> &'static str {
        self.file
    }

    /// The name part of the file stem, recorded on the `SchemaMigration` node.
    pub fn name(&self) -> &'static str {
        self.file
            .split_once('_')
            .map_or(self.file, |(_, name)| name)
    }

    /// The statements of the file, comments removed.
    pub fn statements(&self) -> Vec<String> {
        split_statements(self.cypher)
    }

    /// Whether a server of `version` takes this migration.
    pub fn applies_to(&self, version: &ServerVersion) -> bool {
        self.requires
            .is_none_or(|feature| version.supports(feature))
    }
}

fn split_statements(text: &str) -> Vec<String> {
    let mut statements = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        let trimmed = line.trim_end();
        match trimmed.strip_suffix(';') {
            Some(last) => {
                current.push_str(last);
                let statement = current.trim().to_owned();
                if !statement.is_empty() {
                    statements.push(statement);
                }
                current.clear();
            }
            None => {
                current.push_str(trimmed);
                current.push('\n');
            }
        }
    }
    let rest = current.trim();
    if !rest.is_empty() {
        statements.push(rest.to_owned());
    }
    statements
}

impl GraphStore {
    /// Applies every migration not yet recorded that the server takes, then waits for
    /// indexes to be online.
    pub async fn migrate(&self) -> Result<MigrationReport> {
        let done = self.applied_versions().await?;
        let version = self.server_version().await?;
        let mut report = MigrationReport::default();
        // Opened only when a migration is pending; its connection closes with it.
        let mut maintenance = None;
        for migration in MIGRATIONS {
            if done.contains(&migration.version) {
                report.already += 1;
                continue;
            }
            if !migration.applies_to(&version) {
                continue;
            }
            let pool = match &maintenance {
                Some(pool) => pool,
                None => maintenance.insert(self.maintenance_pool()?),
            };
            for statement in migration.statements() {
                pool.run(neo4rs::query(&statement))
                    .await
                    .map_err(|e| GraphError::neo4j("schema/migration", e))?;
            }
            self.run(
                RECORD_MIGRATION
                    .statement()
                    .param("version", migration.version)
                    .param("name", migration.name()),
            )
            .await?;
            tracing::info!(migration = migration.label(), "applied schema migration");
            report.applied.push(migration.label().to_owned());
        }
        let wait = AWAIT_INDEXES
            .statement()
            .param("timeout_seconds", AWAIT_INDEXES_SECS);
        // An index a migration created populates over the existing data, for minutes on a
        // large store (also when an earlier run applied the migration and this one only
        // waits): a wait longer than the normal pool's receive timeout.
        let pool = match maintenance {
            Some(pool) => pool,
            None => self.maintenance_pool()?,
        };
        pool.run(wait.query)
            .await
            .map_err(|e| GraphError::neo4j(wait.name, e))?;
        // A migration may have replaced the vector index.
        self.forget_vector_index();
        Ok(report)
    }

    /// True when every embedded migration that the server takes is recorded (a newer binary
    /// may know more).
    pub async fn is_migrated(&self) -> Result<bool> {
        let done = self.applied_versions().await?;
        let missing: Vec<&Migration> = MIGRATIONS
            .iter()
            .filter(|m| !done.contains(&m.version))
            .collect();
        if missing.iter().any(|m| m.requires.is_none()) {
            return Ok(false);
        }
        if missing.is_empty() {
            return Ok(true);
        }
        let version = self.server_version().await?;
        Ok(missing.iter().all(|m| !m.applies_to(&version)))
    }

    async fn applied_versions(&self) -> Result<BTreeSet<i64>> {
        self.fetch(APPLIED_MIGRATIONS.statement())
            .await?
            .iter()
            .map(|row| column::<i64>(row, APPLIED_MIGRATIONS.name, "version"))
            .collect()
    }

    /// The dimensions of the episodes' vector index ([`GraphStore::vector_index`]), `None`
    /// when it does not exist.
    pub async fn vector_index_dimensions(&self) -> Result<Option<usize>> {
        #[derive(serde::Deserialize)]
        struct Options {
            #[serde(rename = "indexConfig")]
            index_config: IndexConfig,
        }
        #[derive(serde::Deserialize)]
        struct IndexConfig {
            #[serde(rename = "vector.dimensions")]
            dimensions: Option<i64>,
        }
        let name = self.vector_index().await?.name();
        let Some(options) = self.index_options::<Options>(name).await? else {
            return Ok(None);
        };
        options
            .index_config
            .dimensions
            .map(|d| {
                usize::try_from(d)
                    .map_err(|_| GraphError::decode("schema/index_options", "negative dimensions"))
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_split_at_line_ending_semicolons_and_skip_comments() {
        let text = "// about\nCREATE A\n  FOR x;\n// more\nCREATE B;\n\nCREATE C";
        assert_eq!(
            split_statements(text),
            vec!["CREATE A\n  FOR x", "CREATE B", "CREATE C"]
        );
    }

    #[test]
    fn every_schema_file_is_listed_in_version_order() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../cypher/schema");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".cypher"))
            .collect();
        files.sort();
        let listed: Vec<String> = MIGRATIONS
            .iter()
            .map(|m| format!("{}.cypher", m.label()))
            .collect();
        assert_eq!(files, listed);
        assert!(MIGRATIONS.windows(2).all(|w| w[0].version < w[1].version));
        assert!(MIGRATIONS
            .iter()
            .all(|m| m.file.starts_with(&format!("{:03}_", m.version))));
        assert!(MIGRATIONS.iter().all(|m| !m.statements().is_empty()));
    }
}
