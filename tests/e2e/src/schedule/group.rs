//! The two groups of replicas, each sharing one Lease: provider-nop and the core.

const NOP_LEASE: &str = "crossplane-leader-election-provider-nop";
const CORE_LEASE: &str = "crossplane-leader-election-core";

/// A set of replicas sharing one Lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Group {
    /// provider-nop.
    Nop,
    /// The core (`crossplane core start`).
    Core,
}

impl Group {
    /// Both groups.
    pub const ALL: [Group; 2] = [Group::Nop, Group::Core];

    pub(super) fn short(self) -> &'static str {
        match self {
            Group::Nop => "nop",
            Group::Core => "core",
        }
    }

    /// The binary's name in user agents.
    pub fn binary(self) -> &'static str {
        match self {
            Group::Nop => "provider-nop",
            Group::Core => "crossplane",
        }
    }

    /// Its Lease's name.
    pub fn lease(self) -> &'static str {
        match self {
            Group::Nop => NOP_LEASE,
            Group::Core => CORE_LEASE,
        }
    }
}

impl std::fmt::Display for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.binary())
    }
}
