//! The optional verification stage (`search.verify = "llm"`): one LLM call per search over
//! the top decided episodes, asking "same failure mechanism?". It only moves labels between
//! `strong` and `possible` (`deja_domain::recognition::verify::apply`), is cached by (query,
//! candidate ids and versions), and is bounded by `search.verify_budget_ms` and the search
//! deadline: on timeout or error the search answers with the calibrated decision and says so.

use crate::metrics as m;
use deja_domain::recognition::verify::{apply, cache_key, VerifyReply, MAX_VERIFIED};
use deja_domain::recognition::{Decided, RecognitionParams};
use deja_llm::LlmClient;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The LLM and its cache of verifications.
#[derive(Debug)]
pub struct Verifier {
    client: LlmClient,
    cache: Mutex<Cache>,
}

#[derive(Debug, Default)]
struct Cache {
    entries: HashMap<String, VerifyReply>,
    /// Insertion order, oldest first: the bound evicts the oldest.
    order: VecDeque<String>,
    capacity: usize,
}

impl Cache {
    fn get(&self, key: &str) -> Option<VerifyReply> {
        self.entries.get(key).cloned()
    }

    fn put(&mut self, key: String, reply: VerifyReply) {
        if self.capacity == 0 || self.entries.contains_key(&key) {
            return;
        }
        while self.entries.len() >= self.capacity {
            match self.order.pop_front() {
                Some(oldest) => {
                    self.entries.remove(&oldest);
                }
                None => break,
            }
        }
        self.order.push_back(key.clone());
        self.entries.insert(key, reply);
    }
}

/// What the stage did, for the answer's notice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verified {
    /// Verdicts applied (from the LLM or the cache); how many labels changed.
    Applied { changed: usize, cached: bool },
    /// Nothing to verify.
    Skipped,
    /// The LLM failed or ran out of time: labels are the calibrated decision's.
    Unavailable(String),
}

impl Verifier {
    pub fn new(client: LlmClient, cache_entries: usize) -> Self {
        Verifier {
            client,
            cache: Mutex::new(Cache {
                capacity: cache_entries,
                ..Cache::default()
            }),
        }
    }

    /// Verifies the top `MAX_VERIFIED` of `decided` in place.
    pub async fn verify(
        &self,
        query: &str,
        decided: &mut [Decided],
        params: &RecognitionParams,
        budget: Duration,
        deadline: Instant,
    ) -> Verified {
        let top = decided.len().min(MAX_VERIFIED);
        if top == 0 {
            return Verified::Skipped;
        }
        let key = cache_key(
            query,
            &decided[..top]
                .iter()
                .map(|d| (d.episode.id.as_str(), d.episode.version))
                .collect::<Vec<_>>(),
        );
        let cached = self.cache.lock().ok().and_then(|cache| cache.get(&key));
        if let Some(reply) = cached {
            m::verification("cached");
            let changed = apply(&mut decided[..top], &reply, params);
            return Verified::Applied {
                changed,
                cached: true,
            };
        }
        let until = (Instant::now() + budget).min(deadline);
        let episodes: Vec<&deja_domain::Episode> =
            decided[..top].iter().map(|d| &d.episode).collect();
        let started = Instant::now();
        let outcome =
            tokio::time::timeout_at(until.into(), self.client.verify(query, &episodes)).await;
        m::stage_duration("verify", started.elapsed());
        match outcome {
            Ok(Ok(reply)) => {
                m::verification("called");
                let changed = apply(&mut decided[..top], &reply, params);
                if let Ok(mut cache) = self.cache.lock() {
                    cache.put(key, reply);
                }
                Verified::Applied {
                    changed,
                    cached: false,
                }
            }
            Ok(Err(error)) => {
                m::verification("failed");
                tracing::warn!(%error, "search verification failed; keeping the calibrated labels");
                Verified::Unavailable(format!(
                    "verification by the LLM failed ({}); labels are the calibrated decision's",
                    error.reason_code()
                ))
            }
            Err(_) => {
                m::verification("timeout");
                Verified::Unavailable(
                    "verification by the LLM ran out of time; labels are the calibrated \
                     decision's"
                        .to_owned(),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deja_domain::recognition::verify::{CandidateVerdict, Verdict};

    fn reply(id: &str) -> VerifyReply {
        VerifyReply {
            candidates: vec![CandidateVerdict {
                id: id.into(),
                verdict: Verdict::Yes,
                reason: String::new(),
            }],
        }
    }

    #[test]
    fn the_cache_keeps_at_most_its_capacity_and_evicts_the_oldest() {
        let mut cache = Cache {
            capacity: 2,
            ..Cache::default()
        };
        cache.put("a".into(), reply("a"));
        cache.put("b".into(), reply("b"));
        cache.put("c".into(), reply("c"));
        assert!(cache.get("a").is_none());
        assert_eq!(cache.get("c"), Some(reply("c")));
        assert_eq!(cache.entries.len(), 2);
    }
}
