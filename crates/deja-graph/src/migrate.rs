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
//!
//! Two `migrate` at once (replicas each running it at start) both succeed: Neo4j checks
//! `IF NOT EXISTS` and creates the rule in two steps, so the slower of two processes creating
//! the same index or constraint gets `EquivalentSchemaRuleAlreadyExists` (the rule exists: its
//! statement's work is done) or a deadlock (tried again). One migrate job before the rollout
//! is still the way to run it (docs/SCALING.md).

use crate::queries::{APPLIED_MIGRATIONS, AWAIT_INDEXES, RECORD_MIGRATION};
use crate::server::{ServerFeature, ServerVersion};
use crate::{column, GraphError, GraphStore, Result};
use std::collections::BTreeSet;
use std::time::Duration;

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
    migration!(16, "016_review_strategy_org_indexes"),
];

/// How long `migrate` waits for indexes to come online (the vector index populates in the
/// background, for minutes on a large store). Indexes still populating then are reported,
/// not an error: the migrations are applied and recorded, and the indexes come online by
/// themselves.
const AWAIT_INDEXES_SECS: i64 = 300;

/// Neo4j's answer to a schema statement whose rule (index or constraint) exists already, in
/// an equivalent form: the statement's work is done. An `IF NOT EXISTS` statement gets it
/// when another process created the rule between its check and its creation.
const EQUIVALENT_RULE_EXISTS: &str = "Neo.ClientError.Schema.EquivalentSchemaRuleAlreadyExists";

/// Attempts at a migration statement that fails transiently (two processes creating the same
/// constraint deadlock; every statement is idempotent, so running it again is safe).
const STATEMENT_ATTEMPTS: u32 = 5;

/// What `db.awaitIndexes` says when its time ran out with indexes still populating (Neo4j
/// 5.26 and 2026.x), before the list of those indexes.
const AWAIT_TIMED_OUT: &str = "Indexes not guaranteed to be online:";

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigrationReport {
    /// `NNN_name` of each migration applied by this call.
    pub applied: Vec<String>,
    /// How many were already recorded and skipped.
    pub already: usize,
    /// The server's version, e.g. `5.26.30`.
    pub server: String,
    /// Migrations this server does not take, not recorded (see the module documentation):
    /// `NNN_name` and the feature it lacks.
    pub skipped: Vec<(String, &'static str)>,
    /// Recorded versions above the highest this binary knows: the schema was migrated by a
    /// newer binary, whose migrations may have removed what this one uses.
    pub newer: Vec<i64>,
    /// Indexes still populating when the wait ended (names as Neo4j lists them): the
    /// migrations are applied and recorded, the indexes come online by themselves.
    pub populating: Vec<String>,
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

/// What a server lacking `feature` lacks, for people.
fn feature_text(feature: ServerFeature) -> &'static str {
    match feature {
        ServerFeature::VectorSearchFilters => "vector search filters (Neo4j 2026.01 or later)",
    }
}

/// Runs one migration statement. A rule another process created meanwhile is success (see
/// [`EQUIVALENT_RULE_EXISTS`]); a transient failure (a deadlock with that process, a lost
/// connection) is tried again: every statement is idempotent.
async fn run_statement(pool: &neo4rs::Graph, statement: &str) -> Result<()> {
    let mut attempt = 1;
    loop {
        let error = match pool.run(neo4rs::query(statement)).await {
            Ok(()) => return Ok(()),
            Err(error) => GraphError::neo4j("schema/migration", error),
        };
        if error.neo4j_code() == Some(EQUIVALENT_RULE_EXISTS) {
            tracing::info!(
                statement,
                "schema rule created meanwhile by another process"
            );
            return Ok(());
        }
        if !error.is_transient() || attempt >= STATEMENT_ATTEMPTS {
            return Err(error);
        }
        tracing::info!(statement, attempt, error = %deja_domain::error_chain(&error),
            "schema statement failed transiently; trying again");
        tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
        attempt += 1;
    }
}

/// The indexes `db.awaitIndexes` names as still populating when its time ran out; `None`
/// for any other failure (a failed index among them).
fn still_populating(error: &neo4rs::Error) -> Option<Vec<String>> {
    let neo4rs::Error::Neo4j(error) = error else {
        return None;
    };
    populating_in(error.message())
}

fn populating_in(message: &str) -> Option<Vec<String>> {
    let (_, listed) = message.split_once(AWAIT_TIMED_OUT)?;
    let names: Vec<String> = listed
        .split("name='")
        .skip(1)
        .filter_map(|rest| rest.split_once('\'').map(|(name, _)| name.to_owned()))
        .collect();
    Some(if names.is_empty() {
        vec![listed.trim().to_owned()]
    } else {
        names
    })
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
    /// Applies every migration not yet recorded that the server takes, then waits up to 5
    /// minutes for every index to be online. Indexes still populating then are not an
    /// error: they are listed in [`MigrationReport::populating`] (an index that failed is an
    /// error).
    pub async fn migrate(&self) -> Result<MigrationReport> {
        let done = self.applied_versions().await?;
        let version = self.server_version().await?;
        let known = MIGRATIONS.iter().map(|m| m.version).max().unwrap_or(0);
        let mut report = MigrationReport {
            server: version.text.clone(),
            newer: done.iter().copied().filter(|v| *v > known).collect(),
            ..MigrationReport::default()
        };
        // Opened only when a migration is pending; its connection closes with it.
        let mut maintenance = None;
        for migration in MIGRATIONS {
            if done.contains(&migration.version) {
                report.already += 1;
                continue;
            }
            if !migration.applies_to(&version) {
                if let Some(feature) = migration.requires {
                    report
                        .skipped
                        .push((migration.label().to_owned(), feature_text(feature)));
                }
                continue;
            }
            let pool = match &maintenance {
                Some(pool) => pool,
                None => maintenance.insert(self.maintenance_pool()?),
            };
            for statement in migration.statements() {
                run_statement(pool, &statement).await?;
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
        if let Err(error) = pool.run(wait.query).await {
            match still_populating(&error) {
                Some(indexes) => report.populating = indexes,
                None => return Err(GraphError::neo4j(wait.name, error)),
            }
        }
        // A migration may have replaced the vector index.
        self.forget_vector_index();
        Ok(report)
    }

    /// Runs one schema statement as [`GraphStore::migrate`] runs a migration's, on a
    /// connection of its own: for the tests of two processes migrating at once.
    #[doc(hidden)]
    pub async fn run_schema_statement(&self, statement: &str) -> Result<()> {
        run_statement(&self.maintenance_pool()?, statement).await
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
    fn a_timed_out_wait_names_the_indexes_still_populating() {
        let message = "Failed to invoke procedure `db.awaitIndexes`: Caused by: \
            java.lang.IllegalStateException: Expected all indexes to come online within a \
            reasonable time. Indexes brought online: [IndexDefinition[label:Episode on:org] \
            (Index( id=9, name='episode_org', type='RANGE' ))]. Indexes not guaranteed to be \
            online: [IndexDefinition[label:Episode on:embedding] (Index( id=14, \
            name='episode_embedding_scoped', type='VECTOR' ))]";
        assert_eq!(
            populating_in(message),
            Some(vec!["episode_embedding_scoped".to_owned()])
        );
        assert_eq!(
            populating_in("Index entered a FAILED state. Please see database logs."),
            None
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
