//! Which fold each query is held out in: whole root-cause families (a sibling query's
//! relevant set names its family) and a share of the novel queries per fold, never single
//! queries.

use super::{Memory, QueryCandidates};
use crate::corpus::{EvalQuery, Incidents};
use std::collections::{BTreeSet, HashMap};

/// Folds: the families (and novel queries) of the first `base_incidents` incidents and
/// `base_queries` queries form fold 0 when the corpus is larger than that; the other
/// families are dealt round-robin in name order, the other novel queries in file order.
pub fn assign_folds(
    queries: &[EvalQuery],
    incidents: &Incidents,
    folds: usize,
    base_incidents: usize,
    base_queries: usize,
) -> Vec<usize> {
    let folds = folds.max(2);
    let has_base = incidents.records.len() > base_incidents && queries.len() > base_queries;
    let base_families: BTreeSet<String> = if has_base {
        incidents
            .records
            .iter()
            .take(base_incidents)
            .map(|(_, r)| incidents.family(&r.id).to_owned())
            .collect()
    } else {
        BTreeSet::new()
    };
    let (first, spread) = if has_base { (1, folds - 1) } else { (0, folds) };
    let others: BTreeSet<String> = queries
        .iter()
        .filter(|q| !q.relevant.is_empty())
        .map(|q| incidents.query_family(&q.relevant))
        .filter(|f| !base_families.contains(f))
        .collect();
    let family_fold: HashMap<String, usize> = others
        .into_iter()
        .enumerate()
        .map(|(i, family)| (family, first + i % spread))
        .collect();
    let mut novel_seen = 0usize;
    queries
        .iter()
        .enumerate()
        .map(|(index, query)| {
            if query.relevant.is_empty() {
                if has_base && index < base_queries {
                    return 0;
                }
                novel_seen += 1;
                return first + (novel_seen - 1) % spread;
            }
            let family = incidents.query_family(&query.relevant);
            family_fold.get(&family).copied().unwrap_or(0)
        })
        .collect()
}

/// A fold per query: the families (each sibling query's [`QueryCandidates::family`]) and
/// the novel queries of the curated records, each shuffled with `seed` and dealt
/// round-robin. A query asked of the extracted memory too is held out with its twin (same
/// id), whatever part of its family that memory holds.
pub(crate) fn shuffled_folds(queries: &[QueryCandidates], folds: usize, seed: u64) -> Vec<usize> {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let folds = folds.max(2);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let records: Vec<&QueryCandidates> = queries
        .iter()
        .filter(|q| q.memory == Memory::Records)
        .collect();
    let mut families: Vec<String> = records
        .iter()
        .filter(|q| !q.novel())
        .map(|q| q.family.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    families.shuffle(&mut rng);
    let family_fold: HashMap<&str, usize> = families
        .iter()
        .enumerate()
        .map(|(i, f)| (f.as_str(), i % folds))
        .collect();
    let mut novel: Vec<usize> = (0..records.len()).filter(|&i| records[i].novel()).collect();
    novel.shuffle(&mut rng);
    let novel_fold: HashMap<usize, usize> = novel
        .into_iter()
        .enumerate()
        .map(|(n, i)| (i, n % folds))
        .collect();
    let fold_of_id: HashMap<&str, usize> = records
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let fold = if q.novel() {
                novel_fold[&i]
            } else {
                family_fold[q.family.as_str()]
            };
            (q.id.as_str(), fold)
        })
        .collect();
    queries
        .iter()
        .map(|q| fold_of_id.get(q.id.as_str()).copied().unwrap_or(0))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::tests::query;
    use super::*;

    /// Sibling queries that list different members of one family are still one family.
    #[test]
    fn shuffled_folds_hold_out_a_family_whole_whichever_members_its_queries_list() {
        let mut queries: Vec<QueryCandidates> = (0..8)
            .map(|f| {
                let id = format!("inc-{f}");
                query(&[id.as_str()])
            })
            .collect();
        for members in [["x-1", "x-2"], ["x-2", "x-3"], ["x-1", "x-3"]] {
            queries.push(QueryCandidates {
                family: "pool-leak".to_owned(),
                ..query(&members)
            });
        }
        for seed in 0..10 {
            let folds = shuffled_folds(&queries, 5, seed);
            assert!(folds[8..].iter().all(|f| *f == folds[8]), "{folds:?}");
        }
    }

    #[test]
    fn shuffled_folds_keep_each_family_whole_deal_every_fold_and_repeat_by_seed() {
        let mut queries = Vec::new();
        for family in 0..10 {
            let members: Vec<String> = (0..3).map(|m| format!("inc-{family}-{m}")).collect();
            let members: Vec<&str> = members.iter().map(String::as_str).collect();
            // Three sibling queries per family, listing its incidents in different orders.
            for rotation in 0..3 {
                let mut relevant = members.clone();
                relevant.rotate_left(rotation);
                queries.push(query(&relevant));
            }
        }
        for _ in 0..7 {
            queries.push(query(&[]));
        }
        let folds = shuffled_folds(&queries, 5, 1);
        assert_eq!(folds, shuffled_folds(&queries, 5, 1), "seeded");
        assert_ne!(
            folds,
            shuffled_folds(&queries, 5, 2),
            "another seed, another split"
        );
        for family in queries.chunks(3).take(10).zip(folds.chunks(3)) {
            let (_, family_folds) = family;
            assert!(
                family_folds.iter().all(|f| *f == family_folds[0]),
                "{folds:?}"
            );
        }
        for fold in 0..5 {
            assert_eq!(folds[..30].iter().filter(|f| **f == fold).count(), 6);
            assert!(
                folds[30..].contains(&fold),
                "every fold gets novel queries: {folds:?}"
            );
        }

        // The same queries asked of an extracted memory holding one member of each family:
        // each is held out with its twin, and the curated split does not move.
        let extracted: Vec<QueryCandidates> = queries
            .iter()
            .map(|q| QueryCandidates {
                memory: Memory::Extracted,
                relevant: q.relevant.iter().take(1).cloned().collect(),
                ..q.clone()
            })
            .collect();
        let both: Vec<QueryCandidates> = queries.iter().cloned().chain(extracted).collect();
        let both_folds = shuffled_folds(&both, 5, 1);
        assert_eq!(both_folds[..queries.len()], folds[..]);
        assert_eq!(both_folds[queries.len()..], folds[..]);
    }
}
