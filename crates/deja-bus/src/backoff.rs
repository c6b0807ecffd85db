//! Retry timing: exponential backoff with a cap and jitter, the mapping from a wanted delay to
//! a retry level (one delay queue per level), and [`Exponential`], the same delays as a
//! `backon` policy for the in-process retry loops (reconnecting, probing, synthesis jobs).
//! The functions are pure (the jitter source is a parameter), so they are property-tested.

use std::time::Duration;

/// How much randomness goes into a backoff delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jitter {
    /// Exactly the capped exponential delay. Only for tests and tools: without jitter, a burst
    /// of failures retries in lockstep.
    None,
    /// Uniform in `[0, cap]`: spreads retries the most, but may retry almost at once.
    Full,
    /// Uniform in `[cap/2, cap]`: spreads retries while keeping at least half the delay.
    Equal,
}

/// The un-jittered delay for `attempt` (1-based): `base_ms * 2^(attempt-1)`, capped at `max_ms`.
pub fn backoff_cap_ms(attempt: u32, base_ms: u64, max_ms: u64) -> u64 {
    let exponent = attempt.saturating_sub(1).min(63);
    let growth = 1u64 << exponent;
    base_ms.saturating_mul(growth).min(max_ms)
}

/// The delay before retrying after failed attempt `attempt` (1-based).
///
/// `random` is the jitter source, a number in `[0, 1]` (values outside are clamped, NaN counts
/// as 0), so that this stays a pure function; callers pass `rand::random::<f64>()`.
pub fn backoff(attempt: u32, base_ms: u64, max_ms: u64, jitter: Jitter, random: f64) -> Duration {
    let cap = backoff_cap_ms(attempt, base_ms, max_ms);
    let random = if random.is_nan() {
        0.0
    } else {
        random.clamp(0.0, 1.0)
    };
    let ms = match jitter {
        Jitter::None => cap,
        Jitter::Full => scale(cap, random),
        Jitter::Equal => {
            let half = cap / 2;
            half + scale(cap - half, random)
        }
    };
    Duration::from_millis(ms)
}

/// `value * fraction` rounded down, never above `value` (f64 rounding must not overshoot).
fn scale(value: u64, fraction: f64) -> u64 {
    ((value as f64 * fraction) as u64).min(value)
}

/// Capped exponential backoff with jitter as a `backon` policy: retry `n` waits
/// `backoff(n, base_ms, max_ms, jitter, random)`, so an in-process retry and a retry level of
/// the queue follow one schedule. Unbounded unless [`Exponential::with_max_retries`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exponential {
    base_ms: u64,
    max_ms: u64,
    jitter: Jitter,
    max_retries: Option<u32>,
}

impl Exponential {
    pub fn new(base_ms: u64, max_ms: u64, jitter: Jitter) -> Self {
        Exponential {
            base_ms,
            max_ms,
            jitter,
            max_retries: None,
        }
    }

    /// Gives up after `retries` retries (`retries + 1` attempts in all).
    pub fn with_max_retries(self, retries: u32) -> Self {
        Exponential {
            max_retries: Some(retries),
            ..self
        }
    }
}

impl backon::BackoffBuilder for Exponential {
    type Backoff = ExponentialDelays;

    fn build(self) -> ExponentialDelays {
        ExponentialDelays {
            policy: self,
            retries: 0,
        }
    }
}

/// The delays of one [`Exponential`] run, jittered with `rand::random`.
#[derive(Debug, Clone)]
pub struct ExponentialDelays {
    policy: Exponential,
    retries: u32,
}

impl Iterator for ExponentialDelays {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        if self
            .policy
            .max_retries
            .is_some_and(|max| self.retries >= max)
        {
            return None;
        }
        self.retries = self.retries.saturating_add(1);
        let p = &self.policy;
        Some(backoff(
            self.retries,
            p.base_ms,
            p.max_ms,
            p.jitter,
            rand::random(),
        ))
    }
}

/// The retry levels: level `n` (1-based) holds messages for up to `backoff_cap_ms(n)`.
///
/// There are `max_attempts - 1` levels (a message's last attempt is never retried), but no
/// more than needed to reach `max_ms`: levels past the cap would have the same TTL.
pub fn retry_level_ttls_ms(max_attempts: u32, base_ms: u64, max_ms: u64) -> Vec<u64> {
    let mut ttls = Vec::new();
    for level in 1..max_attempts {
        let ttl = backoff_cap_ms(level, base_ms, max_ms);
        ttls.push(ttl);
        if ttl >= max_ms {
            break;
        }
    }
    ttls
}

/// The level (1-based) for a message that should wait `delay`: the shortest level whose TTL is
/// at least `delay`, else the longest. `None` when there are no levels. The message then
/// carries `expiration = min(delay, ttl)`, so it never waits longer than its level's TTL
/// behind anything else in that level.
pub fn level_for_delay(ttls_ms: &[u64], delay: Duration) -> Option<(usize, u64)> {
    let wanted = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
    let index = ttls_ms
        .iter()
        .position(|&ttl| ttl >= wanted)
        .or_else(|| ttls_ms.len().checked_sub(1))?;
    let ttl = ttls_ms[index];
    Some((index + 1, wanted.min(ttl)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn delays_double_until_the_cap() {
        let d: Vec<u64> = (1..=8).map(|a| backoff_cap_ms(a, 1000, 60_000)).collect();
        assert_eq!(d, vec![1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000]);
    }

    #[test]
    fn retry_levels_stop_at_max_attempts_minus_one_or_at_the_cap() {
        assert_eq!(
            retry_level_ttls_ms(5, 1000, 60_000),
            vec![1000, 2000, 4000, 8000]
        );
        assert_eq!(
            retry_level_ttls_ms(50, 1000, 5000),
            vec![1000, 2000, 4000, 5000]
        );
        assert!(retry_level_ttls_ms(1, 1000, 5000).is_empty());
    }

    #[test]
    fn a_delay_goes_to_the_shortest_level_that_can_hold_it() {
        let ttls = [1000, 2000, 4000];
        assert_eq!(
            level_for_delay(&ttls, Duration::from_millis(10)),
            Some((1, 10))
        );
        assert_eq!(
            level_for_delay(&ttls, Duration::from_millis(1500)),
            Some((2, 1500))
        );
        assert_eq!(
            level_for_delay(&ttls, Duration::from_secs(60)),
            Some((3, 4000))
        );
        assert_eq!(level_for_delay(&[], Duration::from_secs(1)), None);
    }

    #[test]
    fn equal_jitter_for_attempt_n_lands_in_level_n() {
        let ttls = retry_level_ttls_ms(6, 1000, 60_000);
        for attempt in 1..=5u32 {
            for random in [0.0, 0.3, 1.0] {
                let delay = backoff(attempt, 1000, 60_000, Jitter::Equal, random);
                let (level, _) = level_for_delay(&ttls, delay).unwrap_or((0, 0));
                assert!(level as u32 <= attempt, "attempt {attempt} delay {delay:?}");
            }
        }
    }

    #[test]
    fn the_policy_yields_the_capped_schedule_and_stops_at_its_retries() {
        use backon::BackoffBuilder;
        let delays: Vec<u64> = Exponential::new(100, 400, Jitter::None)
            .with_max_retries(4)
            .build()
            .map(|d| d.as_millis() as u64)
            .collect();
        assert_eq!(delays, vec![100, 200, 400, 400]);
        let mut unbounded = Exponential::new(100, 400, Jitter::Equal).build();
        assert!(unbounded.nth(1000).is_some_and(|d| d.as_millis() >= 200));
    }

    proptest! {
        #[test]
        fn backoff_stays_within_its_jitter_bounds(
            attempt in 0u32..200,
            base in 1u64..100_000,
            extra in 0u64..10_000_000,
            random in proptest::num::f64::ANY,
        ) {
            let max = base + extra;
            let cap = backoff_cap_ms(attempt, base, max);
            prop_assert!(cap >= base.min(max) && cap <= max);
            let none = backoff(attempt, base, max, Jitter::None, random).as_millis() as u64;
            prop_assert_eq!(none, cap);
            let full = backoff(attempt, base, max, Jitter::Full, random).as_millis() as u64;
            prop_assert!(full <= cap);
            let equal = backoff(attempt, base, max, Jitter::Equal, random).as_millis() as u64;
            prop_assert!(equal >= cap / 2 && equal <= cap);
        }

        #[test]
        fn the_cap_never_shrinks_as_attempts_grow(attempt in 1u32..200, base in 1u64..10_000, max in 1u64..10_000_000) {
            prop_assert!(backoff_cap_ms(attempt + 1, base, max) >= backoff_cap_ms(attempt, base, max));
        }

        #[test]
        fn the_chosen_expiration_never_exceeds_its_level_ttl(delay_ms in 0u64..10_000_000, attempts in 2u32..30) {
            let ttls = retry_level_ttls_ms(attempts, 1000, 600_000);
            let (level, expiration) = level_for_delay(&ttls, Duration::from_millis(delay_ms)).unwrap_or((0, 0));
            prop_assert!(level >= 1 && level <= ttls.len());
            prop_assert!(expiration <= ttls[level - 1]);
            prop_assert_eq!(expiration, delay_ms.min(ttls[level - 1]));
        }
    }
}
