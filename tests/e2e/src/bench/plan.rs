//! What is compared and how much: the two electors, the lease timings, the full and `--quick` plans.

use std::time::Duration;

/// Which elector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Imp {
    Rust,
    Go,
}

impl Imp {
    pub(super) fn name(self) -> &'static str {
        match self {
            Imp::Rust => "Rust",
            Imp::Go => "client-go",
        }
    }
    pub(super) fn short(self) -> &'static str {
        match self {
            Imp::Rust => "rs",
            Imp::Go => "go",
        }
    }
    pub(super) fn color(self) -> &'static str {
        match self {
            Imp::Rust => "#d9480f",
            Imp::Go => "#1c7ed6",
        }
    }
}

/// Lease duration / renew deadline / retry period.
#[derive(Clone, Copy, Debug)]
pub(super) struct Timings {
    pub(super) lease: Duration,
    pub(super) renew: Duration,
    pub(super) retry: Duration,
}

pub(super) const DEFAULTS: Timings = Timings {
    lease: Duration::from_secs(15),
    renew: Duration::from_secs(10),
    retry: Duration::from_secs(2),
};
pub(super) const CROSSPLANE: Timings = Timings {
    lease: Duration::from_secs(60),
    renew: Duration::from_secs(50),
    retry: Duration::from_secs(2),
};

impl Timings {
    pub(super) fn label(self) -> String {
        format!(
            "{}/{}/{} s",
            self.lease.as_secs(),
            self.renew.as_secs(),
            self.retry.as_secs()
        )
    }
    pub(super) fn tag(self) -> u64 {
        self.lease.as_secs()
    }
}

/// How much to do.
#[derive(Clone, Copy, Debug)]
pub(super) struct Plan {
    pub(super) graceful_reps: usize,
    pub(super) crash_reps_defaults: usize,
    pub(super) crash_reps_crossplane: usize,
    pub(super) rate_window: Duration,
    pub(super) many: usize,
    pub(super) many_window: Duration,
    pub(super) many_handovers: usize,
    pub(super) nop_count: usize,
}

pub(super) const FULL: Plan = Plan {
    graceful_reps: 20,
    crash_reps_defaults: 10,
    crash_reps_crossplane: 10,
    // Longer than the watch timeout (kube asks for about 290 s), so a standby's watch renewal falls in
    // the window rather than being missed by its length.
    rate_window: Duration::from_secs(300),
    many: 50,
    many_window: Duration::from_secs(300),
    many_handovers: 5,
    nop_count: 1000,
};
pub(super) const QUICK: Plan = Plan {
    graceful_reps: 5,
    crash_reps_defaults: 3,
    crash_reps_crossplane: 1,
    rate_window: Duration::from_secs(60),
    many: 20,
    many_window: Duration::from_secs(60),
    many_handovers: 3,
    nop_count: 200,
};
