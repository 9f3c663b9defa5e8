//! A claim's label selector, compiled once and then applied to many
//! volumes: the values of an `In` or `NotIn` requirement go into a hash
//! set, so checking a volume costs one lookup per requirement, whatever
//! the number of values (a selector may list 100,000 of them within the
//! object size limit, and a search checks it against every free volume of
//! the claim's bucket). The sets hash with foldhash, a fraction of std's
//! SipHash on short strings, seeded at random for each set.
//!
//! Compiling such a selector costs as much as a search, so the compiled
//! selectors are kept ([`SelectorCache`], a moka cache that forgets), by
//! the selector's own text: a claim waiting for a volume is searched for
//! again at every resync, and claims written from one template (a
//! StatefulSet's, say) share one compiled selector instead of each
//! keeping a copy until it expires.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::{Labels, MatchError, SelectorError};
use crate::runtime::keys::ObjectKey;

/// A claim's label selector, compiled.
#[derive(Debug)]
pub(super) struct Selector {
    requirements: Vec<Requirement>,
}

/// The values of an `In` or `NotIn` requirement, hashed with a seed of
/// their own.
type Values = HashSet<String, foldhash::fast::RandomState>;

#[derive(Debug)]
enum Requirement {
    Equals(String, String),
    In(String, Values),
    NotIn(String, Values),
    Exists(String),
    DoesNotExist(String),
}

impl Selector {
    /// Compiles `selector` by upstream's `LabelSelectorAsSelector` rules
    /// (key and value syntax is not checked).
    fn compile(selector: &LabelSelector) -> Result<Self, SelectorError> {
        let mut requirements: Vec<Requirement> = selector
            .match_labels
            .iter()
            .flatten()
            .map(|(k, v)| Requirement::Equals(k.clone(), v.clone()))
            .collect();
        for expr in selector.match_expressions.iter().flatten() {
            let key = expr.key.clone();
            let values = expr.values.as_deref().unwrap_or_default();
            let operator = expr.operator.as_str();
            let set = || values.iter().cloned().collect::<Values>();
            let requirement = match operator {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(SelectorError::MissingValues {
                        key,
                        operator: operator.to_owned(),
                    });
                }
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err(SelectorError::UnexpectedValues {
                        key,
                        operator: operator.to_owned(),
                    });
                }
                "In" => Requirement::In(key, set()),
                "NotIn" => Requirement::NotIn(key, set()),
                "Exists" => Requirement::Exists(key),
                "DoesNotExist" => Requirement::DoesNotExist(key),
                _ => {
                    return Err(SelectorError::UnknownOperator {
                        key,
                        operator: operator.to_owned(),
                    });
                }
            };
            requirements.push(requirement);
        }
        Ok(Self { requirements })
    }

    /// Whether the volume's labels satisfy every requirement; an empty
    /// selector matches everything.
    pub(super) fn matches_labels(&self, labels: Option<&Labels>) -> bool {
        let label = |key: &str| labels.and_then(|l| l.get(key));
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => label(k) == Some(v),
            Requirement::In(k, values) => label(k).is_some_and(|l| values.contains(l)),
            Requirement::NotIn(k, values) => label(k).is_none_or(|l| !values.contains(l)),
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::DoesNotExist(k) => label(k).is_none(),
        })
    }

    /// What the selector weighs in the cache: its values, and one for
    /// each requirement.
    fn weight(&self) -> u32 {
        let values: usize = self
            .requirements
            .iter()
            .map(|r| match r {
                Requirement::In(_, values) | Requirement::NotIn(_, values) => values.len(),
                Requirement::Equals(..) | Requirement::Exists(_) | Requirement::DoesNotExist(_) => {
                    0
                }
            })
            .sum();
        u32::try_from(values.saturating_add(self.requirements.len())).unwrap_or(u32::MAX)
    }
}

/// How many values (and requirements) the kept selectors hold at most.
const CACHE_WEIGHT: u64 = 1_000_000;

/// How long a compiled selector is kept after its last search: several
/// resyncs, after which a claim still waiting is compiled again.
const CACHE_IDLE: Duration = Duration::from_secs(600);

/// Compiled selectors by their selector's JSON text.
pub(super) struct SelectorCache(moka::sync::Cache<String, Arc<Selector>>);

impl Default for SelectorCache {
    fn default() -> Self {
        Self(
            moka::sync::Cache::builder()
                .max_capacity(CACHE_WEIGHT)
                .weigher(|_: &String, selector: &Arc<Selector>| selector.weight())
                .time_to_idle(CACHE_IDLE)
                .build(),
        )
    }
}

impl std::fmt::Debug for SelectorCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelectorCache")
            .field("selectors", &self.0.entry_count())
            .finish()
    }
}

impl SelectorCache {
    /// The claim's label selector, compiled (the kept one of the same
    /// text, if any); `None` without a selector; an error names the
    /// claim.
    pub(super) fn of(
        &self,
        claim: &PersistentVolumeClaim,
    ) -> Result<Option<Arc<Selector>>, MatchError> {
        let Some(selector) = claim.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
            return Ok(None);
        };
        let invalid = |source: SelectorError| MatchError::Selector {
            claim: ObjectKey::of(claim),
            source,
        };
        let compile = || Selector::compile(selector).map(Arc::new);
        // A selector's JSON is always written; were it not, compiling
        // each time would still be right.
        let Ok(text) = serde_json::to_string(selector) else {
            return compile().map(Some).map_err(invalid);
        };
        self.0
            .try_get_with(text, compile)
            .map(Some)
            .map_err(|error| invalid(SelectorError::clone(&error)))
    }

    /// How many compiled selectors are kept.
    #[cfg(test)]
    pub(super) fn len(&self) -> u64 {
        self.0.run_pending_tasks();
        self.0.entry_count()
    }
}

#[cfg(test)]
mod tests;
