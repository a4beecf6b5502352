//! What the elector publishes: [`Leadership`] and, while leading, the [`Term`].

use tokio::time::Instant;

use crate::guard::Guard;

/// This candidate's view of the election, published on a `tokio::sync::watch` channel.
#[derive(Clone, Debug)]
pub enum Leadership {
    /// Not leading.
    Following {
        /// The holder last observed on the lock, if any (`None` when the lock is missing or released).
        leader: Option<String>,
    },
    /// Leading: leader work may run while `term.guard()` is valid.
    Leading {
        /// The current term.
        term: Term,
    },
}

impl Leadership {
    /// True when leading.
    pub fn is_leading(&self) -> bool {
        matches!(self, Leadership::Leading { .. })
    }

    /// The term, when leading.
    pub fn term(&self) -> Option<&Term> {
        match self {
            Leadership::Leading { term } => Some(term),
            Leadership::Following { .. } => None,
        }
    }
}

/// One uninterrupted period of leadership.
#[derive(Clone, Debug)]
pub struct Term {
    guard: Guard,
    transitions: i32,
    started: Instant,
}

impl Term {
    pub(crate) fn new(guard: Guard, transitions: i32, started: Instant) -> Self {
        Self {
            guard,
            transitions,
            started,
        }
    }

    /// The guard that leader work checks before writing.
    pub fn guard(&self) -> Guard {
        self.guard.clone()
    }

    /// `leaseTransitions` of the record this term wrote when it acquired the lock.
    pub fn transitions(&self) -> i32 {
        self.transitions
    }

    /// When the acquire request that began this term was sent.
    pub fn started(&self) -> Instant {
        self.started
    }
}
